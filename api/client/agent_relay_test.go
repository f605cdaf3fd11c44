package client

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// Heartbeats go to the current manager, which relays them, even when the
// client knows the leader; one the current manager could not relay
// (not_leader naming the leader) goes to the leader within the same call,
// and the next one starts at the current manager again. A re-report goes
// to the leader on a connection closed after it; other status reports go
// to the current manager on a kept one.
func TestHeartbeatsGoToTheCurrentManager(t *testing.T) {
	var mu sync.Mutex
	calls := map[string][]string{} // manager → "path close?"
	record := func(who string, ctx *fasthttp.RequestCtx, p string) {
		mu.Lock()
		defer mu.Unlock()
		c := ""
		if ctx.Request.Header.ConnectionClose() {
			c = " close"
		}
		calls[who] = append(calls[who], p[strings.LastIndex(p, "/")+1:]+c)
	}
	var leaderAddr string
	var refuse atomic.Bool
	follower := fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		record("follower", ctx, p)
		switch {
		case strings.HasSuffix(p, "/heartbeat") && refuse.Load():
			ctx.SetStatusCode(fasthttp.StatusMisdirectedRequest)
			replyWire(t, ctx, &wire.Error{Code: wire.CodeNotLeader, Leader: leaderAddr, Message: "relay failed"})
		case strings.HasSuffix(p, "/heartbeat"):
			replyWire(t, ctx, &wire.HeartbeatAck{Period: int64(time.Second)})
		case strings.HasSuffix(p, "/status"):
			replyWire(t, ctx, &wire.StatusAck{})
		}
	})
	leaderAddr = fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		record("leader", ctx, p)
		switch {
		case strings.HasSuffix(p, "/heartbeat"):
			replyWire(t, ctx, &wire.HeartbeatAck{Period: int64(time.Second)})
		case strings.HasSuffix(p, "/status"):
			replyWire(t, ctx, &wire.StatusAck{})
		}
	})
	ac, err := NewAgentClient([]string{follower, leaderAddr}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ac.setLeader(leaderAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	beat := func() {
		t.Helper()
		if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1, SessionID: 1}); err != nil {
			t.Fatal(err)
		}
	}
	beat()
	beat()
	refuse.Store(true)
	beat()
	refuse.Store(false)
	beat()
	if _, err := ac.ReportStatus(ctx, &wire.StatusBatch{NodeID: 1, ReReport: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.ReportStatus(ctx, &wire.StatusBatch{NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{
		"follower": "heartbeat heartbeat heartbeat heartbeat status",
		"leader":   "heartbeat status close",
	}
	for who, w := range want {
		if got := strings.Join(calls[who], " "); got != w {
			t.Errorf("%s was called: %q; want %q", who, got, w)
		}
	}
}

// A heartbeat that runs out of time at the current manager keeps the
// agent there once; a second in a row moves it on (a manager that
// refuses or cuts the connection is left at once, as before).
func TestLateHeartbeatMovesOnWhenRepeated(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		<-release
	})
	other := fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		replyWire(t, ctx, &wire.HeartbeatAck{Period: int64(time.Second)})
	})
	ac, err := NewAgentClient([]string{slow, other}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	beat := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1, SessionID: 1})
		return err
	}
	if err := beat(); err == nil {
		t.Fatal("a heartbeat to a manager that never answers succeeded")
	}
	if cur := ac.current(false); !strings.HasSuffix(cur, slow) {
		t.Fatalf("after one late heartbeat the agent moved to %s; want it still at %s", cur, slow)
	}
	if err := beat(); err == nil {
		t.Fatal("a heartbeat to a manager that never answers succeeded")
	}
	if cur := ac.current(false); !strings.HasSuffix(cur, other) {
		t.Fatalf("after two late heartbeats in a row the agent is at %s; want %s", cur, other)
	}
	if err := beat(); err != nil {
		t.Fatalf("the heartbeat at the next manager: %v", err)
	}
}
