package duty

import (
	"context"
	"errors"
	"sync"
	"time"
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

// startWait bounds how long a heartbeat waits for the monitor's start:
// under an agent's shortest call timeout (a second), so that the agent
// hears "retry shortly" rather than giving up on the connection.
const startWait = 900 * time.Millisecond

// awaitStart waits until a start in progress is over, at most startWait.
// It returns nil if the monitor leads by then, ErrNotMonitoring when no
// start is under way (or it ended without leading), and
// ErrMonitorStarting when the wait or ctx ends first.
func (d *MonitorDuty) awaitStart(ctx context.Context) error {
	d.mu.Lock()
	ch, leading := d.mu.starting, d.mu.m.Leading()
	d.mu.Unlock()
	switch {
	case leading: // the start ended since the caller looked
		return nil
	case ch == nil:
		return ErrNotMonitoring
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return ErrMonitorStarting
	case <-d.cfg.Clock.After(startWait):
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
