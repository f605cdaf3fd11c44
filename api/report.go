package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/cluster"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// GroupSubmitter commits a command to one group as it is: no removal
// precheck, no fan-out to the service groups (a node's sync names its own
// group). The engine implements it.
type GroupSubmitter interface {
	SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error)
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
		c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		ack, err := control.SubmitStatus(c, s.cfg.Submitter, reReports{s}, &b)
		if errors.Is(err, cluster.ErrNotMonitoring) {
			// The re-report marker must reach the node monitor, which
			// runs on the leader only.
			return s.notLeader()
		}
		if err != nil {
			return err
		}
		s.metrics.reports.Add(len(ack.Results))
		return s.wireReply(ctx, ack)
	})(ctx, nil)
}

// reReports gives status submission the node monitor while this replica
// leads.
type reReports struct{ s *Server }

func (r reReports) Monitoring() bool { return r.s.cfg.Monitor != nil && r.s.self.Leading() }

func (r reReports) MarkReReported(node statemachine.NodeID) bool {
	return r.s.cfg.Monitor.MarkReReported(node)
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
