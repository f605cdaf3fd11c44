package client

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// heartbeatServer answers every call with a heartbeat ack and counts the
// connections it accepted.
func heartbeatServer(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { replyWire(t, ctx, &wire.HeartbeatAck{}) },
		ConnState: func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateNew {
				conns.Add(1)
			}
		}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String(), conns
}

// An agent holds connections to its managers for its whole life; its
// calls must not start fasthttp.Client's cleaner, a goroutine that wakes
// every 10 s while any connection is held (at 10,000 simulated agents,
// 1,000 wake-ups a second for nothing).
func TestAgentCallsStartNoClientCleaner(t *testing.T) {
	addr, _ := heartbeatServer(t)
	ac, err := NewAgentClient([]string{addr}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	if bytes.Contains(buf, []byte("fasthttp.(*Client).mCleaner")) {
		t.Fatal("an agent's call started fasthttp.Client's cleaner goroutine")
	}
}

// Agents given one HTTP client (a simulated fleet's plain-HTTP pool) share
// its connections: one agent's call after another's takes the idle
// connection the first left.
func TestAgentsSharingAnHTTPClientShareConnections(t *testing.T) {
	addr, conns := heartbeatServer(t)
	hc := SharedHTTP(64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		ac, err := NewAgentClient([]string{addr}, hc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err != nil {
			t.Fatal(i, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("three agents sharing one HTTP client called one after another on %d connections, want 1", n)
	}
	ac, _ := NewAgentClient([]string{addr}, hc)
	ac.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for hostSetOf(hc).get("http://"+addr).ConnsCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the shared idle connection was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
