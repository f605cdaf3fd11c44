package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// GroupSubmitter commits a command to one group as it is: no removal
// precheck, no fan-out to the service groups (a node's sync names its own
// group). The engine implements it.
type GroupSubmitter interface {
	SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error)
}

// reportResult maps a status command's outcome to what the agent does
// with the report.
func reportResult(o routing.Outcome) (wire.ReportResult, string) {
	if o.Failed != nil {
		return wire.ReportRetry, "not applied yet; send it again"
	}
	switch o.Result.Code {
	case statemachine.CodeOK:
		return wire.ReportAccepted, ""
	case statemachine.CodeLowerRank:
		// The manager already has this state or a later one: a resend
		// of something it applied.
		return wire.ReportAccepted, ""
	case statemachine.CodeNodeNotReady, statemachine.CodeExpired:
		// Not applied: the node is reconnecting, or the report's entry
		// reached the log after its deadline.
		return wire.ReportRetry, o.Result.Msg
	}
	return wire.ReportRejected, o.Result.Msg
}

func (s *Server) agentStatus(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		var b wire.StatusBatch
		if e := decodeWire(ctx, &b); e != nil {
			return e
		}
		var err error
		if b.NodeID, err = s.callerNode(ctx, b.NodeID); err != nil {
			return err
		}
		if err := s.checkOwnTasks(b.NodeID, b.Reports); err != nil {
			return err
		}
		if b.ReReport && (s.cfg.Monitor == nil || !s.self.Leading()) {
			// The re-report marker must reach the node monitor, which
			// runs on the leader only.
			return s.notLeader()
		}
		cmds := make([]statemachine.Command, len(b.Reports))
		for i, r := range b.Reports {
			cmds[i] = statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: r.Task, Node: b.NodeID,
				State: r.State, ExitCode: r.ExitCode, Message: r.Message}
		}
		c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// Concurrent submissions from many agents share Raft entries: the
		// engine's proposer puts everything queued for a group into its
		// next entry (group commit).
		outs := s.cfg.Submitter.SubmitMany(c, cmds)
		ack := &wire.StatusAck{Results: make([]wire.ReportResult, len(outs)), Messages: make([]string, len(outs))}
		retry := false
		for i, o := range outs {
			ack.Results[i], ack.Messages[i] = reportResult(o)
			retry = retry || ack.Results[i] == wire.ReportRetry
			s.metrics.reports.Inc()
		}
		if b.ReReport && !retry {
			// A node that is not reconnecting (a fresh session of a ready
			// node) has nothing to finish: the monitor ignores the marker.
			s.cfg.Monitor.MarkReReported(b.NodeID)
		}
		return s.wireReply(ctx, ack)
	})(ctx, nil)
}

func (s *Server) agentSync(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		var req wire.SyncRequest
		if e := decodeWire(ctx, &req); e != nil {
			return e
		}
		var err error
		if req.NodeID, err = s.callerNode(ctx, req.NodeID); err != nil {
			return err
		}
		groups := s.reads.Groups()
		held := make([][]statemachine.TaskID, groups+1)
		answer := &wire.SyncAnswer{}
		for _, id := range req.Held {
			g := routing.TaskGroup(id)
			if g < 1 || g > groups {
				answer.Destroy = append(answer.Destroy, id) // no group of this cluster made it
				continue
			}
			held[g] = append(held[g], id)
		}
		c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		type result struct {
			g       int
			destroy []statemachine.TaskID
			err     error
		}
		results := make(chan result, groups)
		n := 0
		for g := 1; g <= groups; g++ {
			seq := uint64(0)
			if g < len(req.Seqs) {
				seq = req.Seqs[g]
			}
			if seq == 0 && len(held[g]) == 0 {
				continue
			}
			n++
			go func(g int, seq uint64) {
				r := result{g: g}
				if seq > 0 {
					// Nothing to confirm and this replica applied what the
					// agent saw: answer from its state, commit nothing.
					local := false
					r.err = s.reads.ReadLocal(g, func(st *statemachine.State) {
						if local = !st.SyncNeedsCommit(req.NodeID, seq); local {
							r.destroy = st.SyncAnswer(req.NodeID, held[g])
						}
					})
					if r.err == nil && local {
						results <- r
						return
					}
					r.err = nil
				}
				// Confirm releases first (fenced by the sequence), then
				// answer what to destroy from the state that includes them.
				if seq > 0 {
					_, r.err = s.toGroup.SubmitToGroup(c, g, statemachine.Command{Kind: statemachine.CmdNodeSync,
						Node: req.NodeID, Seq: seq, Tasks: held[g]})
				}
				answer := func(st *statemachine.State) { r.destroy = st.SyncAnswer(req.NodeID, held[g]) }
				switch {
				case seq > 0 && r.err == nil:
					// This replica applied the sync entry, so its state is
					// at least as new as what the agent had seen.
					r.err = s.reads.ReadLocal(g, answer)
				case r.err == nil || errors.Is(r.err, statemachine.ErrInvalid) || errors.Is(r.err, statemachine.ErrNotFound):
					// Nothing was applied here: read past everything
					// committed, or a lagging replica would have the agent
					// destroy tasks it does not know yet.
					r.err = s.reads.Read(c, g, answer)
				}
				results <- r
			}(g, seq)
		}
		var firstErr error
		for range n {
			r := <-results
			if r.err != nil && firstErr == nil {
				firstErr = r.err
			}
			answer.Destroy = append(answer.Destroy, r.destroy...)
		}
		if firstErr != nil {
			return firstErr
		}
		s.metrics.syncs.Inc()
		return s.wireReply(ctx, answer)
	})(ctx, nil)
}
