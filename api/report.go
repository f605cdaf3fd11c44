package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

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
		ack, err := s.agents.ReportStatus(c, &b)
		if err != nil {
			return err
		}
		s.metrics.reports.Add(len(ack.Results))
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
		ans, err := s.agents.Sync(c, &req)
		if err != nil {
			return err
		}
		s.metrics.syncs.Inc()
		return s.wireReply(ctx, ans)
	})(ctx, nil)
}

// agentCluster gives the agent protocol (control.Agents) the server's
// reads, its group submitter and its submitter.
type agentCluster struct {
	Reader
	GroupSubmitter
	Submitter
}

// statusCluster is an agentCluster whose submitter takes status reports
// as they are (control.StatusSubmitter: duty.Submitter).
type statusCluster struct {
	agentCluster
	control.StatusSubmitter
}

// newAgentCluster is cfg's agentCluster, a statusCluster when its
// submitter takes status reports as they are.
func newAgentCluster(cfg Config) control.Cluster {
	c := agentCluster{cfg.Reads, cfg.ToGroup, cfg.Submitter}
	if st, ok := cfg.Submitter.(control.StatusSubmitter); ok {
		return statusCluster{c, st}
	}
	return c
}
