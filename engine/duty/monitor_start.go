package duty

import (
	"context"
	"errors"
	"sync"
)

// A new leader's monitor starts by reading the whole node table, which
// waits for the new term's first commit. Heartbeats that reach it
// meanwhile (a fleet that lost its leader dials the new one at once) wait
// for the start instead of being told this replica does not monitor: the
// agents would count a failure and come back later, each time with a
// longer delay.

// ErrMonitorStarting: this replica was just elected and its node monitor
// is still loading the node list; retry shortly, here.
var ErrMonitorStarting = errors.New("engine: node monitor is starting on this replica")

// beginStart marks the monitor as starting; the returned func (safe to
// call more than once) marks the start over, whatever its outcome.
func (d *MonitorDuty) beginStart() (done func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	d.mu.starting = ch
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			if d.mu.starting == ch {
				d.mu.starting = nil
			}
			d.mu.Unlock()
			close(ch)
		})
	}
}

// awaitStart waits until a start in progress is over. It returns
// ErrNotMonitoring when none is (or it ended without leading), and
// ErrMonitorStarting when ctx ends first.
func (d *MonitorDuty) awaitStart(ctx context.Context) error {
	d.mu.Lock()
	ch := d.mu.starting
	d.mu.Unlock()
	if ch == nil {
		return ErrNotMonitoring
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return ErrMonitorStarting
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.m.Leading() {
		return ErrNotMonitoring
	}
	return nil
}

// tracked returns how many nodes the monitor tracks.
func (d *MonitorDuty) tracked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.m.Nodes())
}
