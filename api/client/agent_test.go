package client

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// An agent holds at most AgentConnsPerManager connections to a manager:
// while its long poll waits, its heartbeat, status report and sync take
// turns on the one other connection, and each is answered.
func TestAgentTakesTurnsOnItsConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: inner}
	polling, release := make(chan struct{}), make(chan struct{})
	reply := func(ctx *fasthttp.RequestCtx, m wire.Message) {
		b, err := wire.Append(nil, m)
		if err != nil {
			t.Error(err)
		}
		ctx.SetBody(b)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		switch p := string(ctx.Path()); {
		case strings.HasSuffix(p, "/assignments"):
			close(polling)
			<-release
			reply(ctx, &wire.Assignments{Kind: wire.FrameIncremental, Last: true})
		case strings.HasSuffix(p, "/heartbeat"):
			reply(ctx, &wire.HeartbeatAck{})
		case strings.HasSuffix(p, "/status"):
			reply(ctx, &wire.StatusAck{})
		case strings.HasSuffix(p, "/sync"):
			reply(ctx, &wire.SyncAnswer{})
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	ac, err := NewAgentClient([]string{ln.Addr().String()}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	polled := make(chan error, 1)
	go func() {
		_, err := ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: 1, Wait: int64(time.Minute)})
		polled <- err
	}()
	select {
	case <-polling:
	case <-ctx.Done():
		t.Fatal("the long poll never reached the manager")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, call := range []func() error{
		func() error { _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); return err },
		func() error { _, err := ac.ReportStatus(ctx, &wire.StatusBatch{NodeID: 1}); return err },
		func() error { _, err := ac.Sync(ctx, &wire.SyncRequest{NodeID: 1}); return err },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- call()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a short call beside the long poll: %v", err)
		}
	}
	close(release)
	if err := <-polled; err != nil {
		t.Fatalf("long poll: %v", err)
	}
	if n := ln.n.Load(); n > AgentConnsPerManager {
		t.Fatalf("the agent opened %d connections to one manager, want at most %d", n, AgentConnsPerManager)
	}
}
