package duty

import (
	"context"
	"errors"
	"testing"
	"time"

	"shoal/engine/monitor"
	"shoal/statemachine"
)

// gatedReads is a cluster whose linearizable reads wait for gate, telling
// entered when one begins: a new leader waiting for its term's first
// commit.
type gatedReads struct {
	*Memory
	entered chan struct{}
	gate    chan struct{}
}

func (g gatedReads) Read(ctx context.Context, group int, fn func(*statemachine.State)) error {
	g.entered <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Memory.Read(ctx, group, fn)
}

// Property: a heartbeat that reaches a monitor still loading its node list
// is answered once the monitor leads, never with "not monitoring"; one
// whose caller gives up first, or that waited startWait, is told the
// monitor is starting.
func TestHeartbeatDuringStartWaitsForIt(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	mustSubmit(t, e, zoneNodes(1)...)
	g := gatedReads{Memory: e, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	d, err := NewMonitorDuty(g, MonitorConfig{Clock: clk, Interval: 5 * time.Second,
		Monitor: monitor.Config{Jitter: -1, MinTTL: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Heartbeat(context.Background(), 1, clk.Now()); !errors.Is(err, ErrNotMonitoring) {
		t.Fatalf("heartbeat before any start: %v, want ErrNotMonitoring", err)
	}
	stop := runDuty(t, d.Run)
	defer stop()
	<-g.entered // Run is loading the node list

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
	close(g.gate)
	if err := <-res; err != nil {
		t.Fatalf("heartbeat during the start: %v, want it answered once the monitor leads", err)
	}
}
