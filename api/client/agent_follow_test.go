package client

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// fakeManager is a manager whose answers the test chooses per endpoint.
func fakeManager(t *testing.T, handle func(ctx *fasthttp.RequestCtx, path string)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { handle(ctx, string(ctx.Path())) }}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

func replyWire(t *testing.T, ctx *fasthttp.RequestCtx, m wire.Message) {
	b, err := wire.Append(nil, m)
	if err != nil {
		t.Error(err)
	}
	ctx.SetBody(b)
}

// Agents follow the majority: a poll parked on a manager that then fails
// a heartbeat (it led, and is now cut off) is given up and asked again of
// another manager at once; a manager that answers no_quorum is left for
// another within the same call. Neither waits out the poll's deadline.
func TestPollLeavesAManagerCutOff(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var answered = make(chan string, 4)
	good := fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		if strings.HasSuffix(p, "/assignments") {
			answered <- "good"
			replyWire(t, ctx, &wire.Assignments{Kind: wire.FrameIncremental, Last: true})
		}
	})
	parked := make(chan struct{}, 4)
	cut := fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		switch {
		case strings.HasSuffix(p, "/assignments"):
			parked <- struct{}{}
			<-release // never answers while the test runs
		case strings.HasSuffix(p, "/heartbeat"):
			ctx.Hijack(func(c net.Conn) { c.Close() }) // the path is dead
		}
	})
	ac, err := NewAgentClient([]string{cut, good}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ac.mu.cur, ac.mu.leader = 0, "http://"+cut
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: 1, Wait: int64(time.Minute)})
		done <- err
	}()
	<-parked
	start := time.Now()
	if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err == nil {
		t.Fatal("a heartbeat over a dead path succeeded")
	}
	select {
	case err := <-done:
		if err != nil || <-answered != "good" {
			t.Fatalf("the poll after its manager failed a heartbeat: %v", err)
		}
		t.Logf("poll moved %s after the failed heartbeat", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the poll stayed parked on a manager that failed a heartbeat")
	}

	// A manager without quorum says so: the call moves on at once.
	noQuorum := fakeManager(t, func(ctx *fasthttp.RequestCtx, p string) {
		replyWire(t, ctx, &wire.Error{Code: wire.CodeNoQuorum, Message: "cut off"})
	})
	ac2, err := NewAgentClient([]string{noQuorum, good}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ac2.mu.cur = 0
	if _, err := ac2.Assignments(ctx, &wire.AssignmentsRequest{NodeID: 1}); err != nil {
		t.Fatalf("a poll first sent to a manager without quorum: %v", err)
	}
	if got := <-answered; got != "good" {
		t.Fatalf("answered by %s", got)
	}
}
