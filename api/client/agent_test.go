package client

import (
	"context"
	"errors"
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

// An agent's heartbeat is answered while its long poll waits and a status
// report waits for a commit, however many syncs it has to send meanwhile:
// the short calls take turns (no sync reaches the manager before the
// report is answered, and each is answered after), and the agent holds at
// most AgentConnsPerManager connections to the manager.
func TestHeartbeatNeverWaitsBehindShortCalls(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: inner}
	polling, reporting, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var syncs atomic.Int64
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
		case strings.HasSuffix(p, "/status"):
			close(reporting)
			<-release // waits for its commit
			reply(ctx, &wire.StatusAck{})
		case strings.HasSuffix(p, "/sync"):
			syncs.Add(1)
			<-release
			reply(ctx, &wire.SyncAnswer{})
		case strings.HasSuffix(p, "/heartbeat"):
			reply(ctx, &wire.HeartbeatAck{})
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the shutdown, which waits for the handlers

	ac, err := NewAgentClient([]string{ln.Addr().String()}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 5)
	var wg sync.WaitGroup
	run := func(call func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- call()
		}()
	}
	run(func() error {
		_, err := ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: 1, Wait: int64(time.Minute)})
		return err
	})
	<-polling
	run(func() error { _, err := ac.ReportStatus(ctx, &wire.StatusBatch{NodeID: 1}); return err })
	<-reporting
	started := make(chan struct{}, 3)
	for range 3 {
		run(func() error {
			started <- struct{}{}
			_, err := ac.Sync(ctx, &wire.SyncRequest{NodeID: 1})
			return err
		})
	}
	for range 3 {
		<-started
	}
	hb, hbCancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = ac.Heartbeat(hb, &wire.Heartbeat{NodeID: 1})
	hbCancel()
	if err != nil {
		t.Fatalf("a heartbeat beside a waiting long poll and report: %v", err)
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("%d syncs reached the manager while the report waited, want them to wait their turn", n)
	}
	unblock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a call: %v", err)
		}
	}
	if n := syncs.Load(); n != 3 {
		t.Fatalf("%d syncs answered, want 3", n)
	}
	if n := ln.n.Load(); n > AgentConnsPerManager {
		t.Fatalf("the agent opened %d connections to one manager, want at most %d", n, AgentConnsPerManager)
	}
}

// A long poll returns as soon as its context ends, whatever the manager
// does: an agent told to stop does not wait for its poll to be answered.
func TestAssignmentsPollEndsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	polling, release := make(chan struct{}), make(chan struct{})
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		close(polling)
		<-release // nothing new for this node, for as long as the test runs
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	t.Cleanup(func() { close(release) }) // before the shutdown, which waits for the handler
	ac, err := NewAgentClient([]string{ln.Addr().String()}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	ended := make(chan error, 1)
	go func() {
		_, err := ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: 1, Wait: int64(time.Hour)})
		ended <- err
	}()
	<-polling
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the poll ended with %v; want its context's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll did not end with its context: it waits for the manager's answer")
	}
}

// keepingListener keeps every connection it accepts, so a test can close
// them from the server's side.
type keepingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *keepingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *keepingListener) closeAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	n := len(l.conns)
	l.conns = nil
	return n
}

// A call whose pooled connections the manager closed meanwhile (to make
// room, or because it restarted) goes out again on a new connection
// instead of failing on each dead one in turn.
func TestCallsOutliveTheirPooledConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &keepingListener{Listener: inner}
	var beats atomic.Int64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		beats.Add(1)
		b, err := wire.Append(nil, &wire.HeartbeatAck{})
		if err != nil {
			t.Error(err)
		}
		ctx.SetBody(b)
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	ac, err := NewAgentClient([]string{ln.Addr().String()}, AgentHTTPS(nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Three heartbeats at once leave three idle connections in the pool.
	var wg sync.WaitGroup
	for range AgentConnsPerManager {
		wg.Go(func() {
			if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err != nil {
				t.Errorf("a heartbeat: %v", err)
			}
		})
	}
	wg.Wait()
	if n := ln.closeAll(); n == 0 {
		t.Fatal("no connection to close")
	}
	for i := range 2 {
		if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err != nil {
			t.Fatalf("heartbeat %d after the manager closed the agent's connections: %v", i+1, err)
		}
	}
	if n := beats.Load(); n != AgentConnsPerManager+2 {
		t.Fatalf("the manager answered %d heartbeats, want %d", n, AgentConnsPerManager+2)
	}
}

// Agents that lose their manager spread over the others, not all onto the
// next one in the list (which every agent holds in the same order).
func TestAgentsLosingTheirManagerSpreadOverTheOthers(t *testing.T) {
	addrs := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
	const agents = 1000
	on := map[string]int{}
	for range agents {
		ac, err := NewAgentClient(addrs, nil)
		if err != nil {
			t.Fatal(err)
		}
		dead := ac.current(false)
		ac.failed(dead)
		next := ac.current(false)
		if next == dead {
			t.Fatalf("an agent stayed on %s, which it could not reach", dead)
		}
		on[next]++
	}
	for _, a := range addrs[1:] {
		if n := on["http://"+a]; n < agents*4/10 || n > agents*6/10 {
			t.Fatalf("agents moved %v, want each of the two others to take about half", on)
		}
	}
}
