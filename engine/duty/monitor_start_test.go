package duty

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"shoal/engine/monitor"
	"shoal/internal/clock"
	"shoal/statemachine"
)

// gatedReads is a cluster whose reads of the applied state (local) or
// linearizable ones (fresh) wait for gate, telling entered when one
// begins: a replica slow to read its node list, or a new leader waiting
// for its term's first commit.
type gatedReads struct {
	*Memory
	local   bool // gate ReadLocal, else Read
	entered chan struct{}
	gate    chan struct{}
	release func() // closes gate (once)
}

func (g gatedReads) Read(ctx context.Context, group int, fn func(*statemachine.State)) error {
	if !g.local {
		g.entered <- struct{}{}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Memory.Read(ctx, group, fn)
}

func (g gatedReads) ReadLocal(group int, fn func(*statemachine.State)) error {
	if g.local {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return g.Memory.ReadLocal(group, fn)
}

// gated returns a monitor duty (5s TTL) over one node's cluster whose
// local or fresh reads wait for the returned gate's closing (at the
// test's end at the latest).
func gated(t *testing.T, local bool) (*MonitorDuty, gatedReads, *clock.Fake) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	mustSubmit(t, e, zoneNodes(1)...)
	g := gatedReads{Memory: e, local: local, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	var once sync.Once
	g.release = func() { once.Do(func() { close(g.gate) }) }
	t.Cleanup(g.release)
	d, err := NewMonitorDuty(g, MonitorConfig{Clock: clk, Interval: 5 * time.Second,
		Monitor: monitor.Config{Jitter: -1, MinTTL: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return d, g, clk
}

// Property: a heartbeat that reaches a monitor still loading its node list
// is answered once the monitor leads, never with "not monitoring"; one
// whose caller gives up first, or that waited startWait, is told the
// monitor is starting.
func TestHeartbeatDuringStartWaitsForIt(t *testing.T) {
	d, g, clk := gated(t, true)
	if _, err := d.Heartbeat(context.Background(), 1, clk.Now()); !errors.Is(err, ErrNotMonitoring) {
		t.Fatalf("heartbeat before any start: %v, want ErrNotMonitoring", err)
	}
	stop := runDuty(t, d.Run)
	defer stop()
	<-g.entered // Run is reading the node list

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Heartbeat(gone, 1, clk.Now()); !errors.Is(err, ErrMonitorStarting) {
		t.Fatalf("heartbeat given up during the start: %v, want ErrMonitorStarting", err)
	}

	// One that waits longer than startWait is told the monitor is starting
	// (its agent gives up on a call after a second).
	res := make(chan error, 1)
	go func() {
		_, err := d.Heartbeat(context.Background(), 1, clk.Now())
		res <- err
	}()
	blockUntil(t, clk, 2) // its bound, and the one the heartbeat given up left armed
	clk.Advance(startWait)
	if err := <-res; !errors.Is(err, ErrMonitorStarting) {
		t.Fatalf("heartbeat that waited out the start's bound: %v, want ErrMonitorStarting", err)
	}

	go func() {
		_, err := d.Heartbeat(context.Background(), 1, clk.Now())
		res <- err
	}()
	g.release()
	if err := <-res; err != nil {
		t.Fatalf("heartbeat during the start: %v, want it answered once the monitor leads", err)
	}
}

// The monitor takes heartbeats from the node list this replica applied,
// while its linearizable read of the last term's commits still waits.
func TestMonitorLeadsBeforeItsLinearizableRead(t *testing.T) {
	d, g, clk := gated(t, false)
	stop := runDuty(t, d.Run)
	defer stop()
	<-g.entered // a linearizable read of the node list is under way, and waits
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Heartbeat(ctx, 1, clk.Now()); err != nil {
		t.Fatalf("heartbeat while the first linearizable read waits: %v, want it taken", err)
	}
}

// laggingReads is a cluster whose replica has not applied the last
// entries: its local reads see applied, its linearizable reads the rest.
type laggingReads struct {
	*Memory
	applied *Memory
}

func (l laggingReads) ReadLocal(group int, fn func(*statemachine.State)) error {
	return l.applied.ReadLocal(group, fn)
}

// A node that left its status and came back to it in entries this replica
// had not applied when its monitor started is tracked from the new period
// once the monitor caught up: an initializing node that re-entered that
// status just now does not count as initializing since long ago (its next
// heartbeat would have made it ready without a re-report).
func TestCatchUpTakesAReenteredStatusPeriod(t *testing.T) {
	clk := newFakeClock()
	current, applied := newMem(t, 1, clk), newMem(t, 1, clk)
	status := func(e *Memory, s statemachine.NodeStatus) {
		mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: s})
	}
	for _, e := range []*Memory{current, applied} {
		mustSubmit(t, e, zoneNodes(1)...)
		status(e, statemachine.NodeDown)
		status(e, statemachine.NodeInitializing)
	}
	clk.Advance(time.Hour)
	status(current, statemachine.NodeDown) // entries the replica has not applied
	status(current, statemachine.NodeInitializing)

	d, err := NewMonitorDuty(laggingReads{Memory: current, applied: applied}, MonitorConfig{Clock: clk, Interval: 5 * time.Second,
		Monitor: monitor.Config{Jitter: -1, MinTTL: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runDuty(t, d.Run)
	defer stop()
	blockUntil(t, clk, 1) // started, caught up, waiting for its first tick
	b, err := d.Heartbeat(context.Background(), 1, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if b.Changed {
		t.Fatalf("a node initializing again since now was made %s by its first heartbeat, without a re-report", b.Change.To)
	}
}
