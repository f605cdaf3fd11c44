package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// doneCounter is a context that counts the calls to its Done.
type doneCounter struct {
	context.Context
	n atomic.Int64
}

func (c *doneCounter) Done() <-chan struct{} {
	c.n.Add(1)
	return c.Context.Done()
}

// A heartbeat, and a short call whose turn is free, ask their context for
// its deadline only, never for its Done channel: an agent's call context
// sets up its timer only when something waits on it.
func TestCallsWithoutWaitingLeaveDoneAlone(t *testing.T) {
	addr := fakeManager(t, func(ctx *fasthttp.RequestCtx, path string) {
		switch path {
		case "/v1/agent/heartbeat":
			replyWire(t, ctx, &wire.HeartbeatAck{})
		case "/v1/agent/status":
			replyWire(t, ctx, &wire.StatusAck{})
		case "/v1/agent/sync":
			replyWire(t, ctx, &wire.SyncAnswer{})
		}
	})
	ac, err := NewAgentClient([]string{addr}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx := &doneCounter{Context: parent}
	if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1, SessionID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.ReportStatus(ctx, &wire.StatusBatch{NodeID: 1, SessionID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Sync(ctx, &wire.SyncRequest{NodeID: 1, SessionID: 1}); err != nil {
		t.Fatal(err)
	}
	if n := ctx.n.Load(); n != 0 {
		t.Fatalf("Done asked for %d times", n)
	}
}
