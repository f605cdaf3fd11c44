package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// An agent's polls run one after another on one goroutine, kept between
// them (a new one per poll grew its stack through the HTTP and TLS code
// every time); a poll the agent gave up keeps its goroutine until it
// ends, so the next poll starts another, and once the given-up poll ended
// the next one finds an idle goroutine again.
func TestPollsReuseTheirGoroutine(t *testing.T) {
	hang, held, release := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	addr := fakeManager(t, func(ctx *fasthttp.RequestCtx, path string) {
		select {
		case <-hang:
			close(held)
			<-release // this poll is given up by the agent
		default:
		}
		replyWire(t, ctx, &wire.Assignments{Kind: wire.FrameIncremental, Last: true})
	})
	ac, err := NewAgentClient([]string{addr}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	req := &wire.AssignmentsRequest{NodeID: 1, SessionID: 1}
	poll := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := ac.Assignments(ctx, req)
		return err
	}
	for i := range 5 {
		if err := poll(); err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
	}
	if n := ac.pollers.Load(); n != 1 {
		t.Fatalf("5 polls one after another started %d goroutines, want 1", n)
	}

	hang <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	if _, err := ac.Assignments(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("the poll the manager holds ended with %v, want its context's end", err)
	}
	if err := poll(); err != nil {
		t.Fatalf("the poll after a given-up one: %v", err)
	}
	if n := ac.pollers.Load(); n != 2 {
		t.Fatalf("%d goroutines started, want 2 (the given-up poll still holds the first)", n)
	}
	for i := range 5 {
		if err := poll(); err != nil {
			t.Fatalf("poll %d after the given-up one: %v", i, err)
		}
	}
	if n := ac.pollers.Load(); n != 2 {
		t.Fatalf("%d goroutines started, want still 2", n)
	}
}
