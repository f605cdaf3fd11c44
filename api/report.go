package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/manager/control"
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
		c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		destroy, err := control.Sync(c, syncGroups{s.reads, s.toGroup}, &req)
		if err != nil {
			return err
		}
		s.metrics.syncs.Inc()
		return s.wireReply(ctx, &wire.SyncAnswer{Destroy: destroy})
	})(ctx, nil)
}

// syncGroups gives the sync fan-out the server's reads and its group
// submitter.
type syncGroups struct {
	Reader
	GroupSubmitter
}
