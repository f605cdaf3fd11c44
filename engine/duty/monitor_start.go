package duty

import (
	"context"
	"sync"
	"time"

	"shoal/cluster"
	"shoal/statemachine"
)

// How a new leader's node monitor starts, and what heartbeats that reach
// it meanwhile get: they wait for the start (a fleet that lost its leader
// dials the new one at once) instead of being told this replica does not
// monitor, which the agents would count as a failure and come back from
// later, each time with a longer delay.

// Run monitors the nodes until ctx ends: it becomes leader from the node
// list this replica has applied (retrying every Interval until it can
// read it), catches up with a linearizable read, then ticks every
// Interval. A new leader's first linearizable read waits for its term's
// first commit: beside 10,000 reconnecting agents that took 1.6–4.2 s,
// and no heartbeat could be taken meanwhile. Starting from the applied
// list is safe: no node is marked down within the failover grace, and
// the catch-up (or the next tick, which reads the applied list again)
// corrects what the last entries changed; a node created by them is
// looked up when it first heartbeats.
func (d *MonitorDuty) Run(ctx context.Context) {
	defer d.StepDown()
	started := d.beginStart()
	defer started()
	t0 := d.cfg.Clock.Now()
	var applied []nodeRow
	if !d.retry(ctx, "", func() (err error) {
		applied, err = d.lead(ctx, false)
		return err
	}) {
		return
	}
	started()
	if took := d.cfg.Clock.Now().Sub(t0); took >= slowStart {
		d.cfg.Logf("engine: node monitor: this new leader took %s to read its %d nodes before taking heartbeats",
			took.Round(time.Millisecond), d.tracked())
	}
	d.catchUp(ctx, t0, applied)
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.cfg.Clock.After(d.cfg.Interval):
		}
		if err := d.Tick(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logf("engine: node monitor: %v", err)
		}
	}
}

// slowStart is how long a monitor's start or catch-up may take before it
// is logged.
const slowStart = 100 * time.Millisecond

// ErrMonitorStarting: this replica was just elected and its node monitor
// is still loading the node list; retry shortly, here.
var ErrMonitorStarting = cluster.ErrMonitorStarting

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
	return d.mu.m.Len()
}

// catchUp re-syncs the monitor from a linearizable read of the node list
// (everything the last term committed), retrying every Interval until it
// can or ctx ends; t0 is when Run began, for its log line. applied is the
// list the term started from. A node whose row changed between the two
// reads but kept its status (it left that status and came back in entries
// this replica had not applied) is tracked afresh from the new row: Track
// alone keeps a status it already has with its old since, and the period's
// re-report and orphan marks. A node the monitor changed itself since the
// start (or is changing) is left to its own proposals.
func (d *MonitorDuty) catchUp(ctx context.Context, t0 time.Time, applied []nodeRow) {
	var rows []nodeRow
	if !d.retry(ctx, "catching up: ", func() (err error) {
		rows, err = d.readNodes(ctx, true)
		return err
	}) {
		return
	}
	before := make(map[statemachine.NodeID]nodeRow, len(applied))
	for _, r := range applied {
		before[r.id] = r
	}
	d.mu.Lock()
	now := d.now()
	for _, r := range rows {
		b, ok := before[r.id]
		if !ok || b == r || b.status != r.status || d.mu.inflight[r.id] != 0 {
			continue
		}
		if st, tracked := d.mu.m.Status(r.id); tracked && st == b.status {
			d.mu.m.Forget(r.id)
			d.mu.m.Track(r.id, r.status, r.since, now)
		}
	}
	d.syncLocked(rows, now)
	d.mu.Unlock()
	if took := d.cfg.Clock.Now().Sub(t0); took >= slowStart {
		d.cfg.Logf("engine: node monitor: this new leader had everything the last one committed %s after it began leading",
			took.Round(time.Millisecond))
	}
}

// retry calls f until it succeeds (true), logging each failure after
// what and waiting Interval before the next try, or until ctx ends
// (false).
func (d *MonitorDuty) retry(ctx context.Context, what string, f func() error) bool {
	for {
		err := f()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d.cfg.Logf("engine: node monitor: %s%v", what, err)
		select {
		case <-ctx.Done():
			return false
		case <-d.cfg.Clock.After(d.cfg.Interval):
		}
	}
}
