package agent

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/callctx"
	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// Agent is the runner around the Machine: it holds the clock, the manager
// client, the executor and the store, and runs five loops — session and
// heartbeats, assignments, status reports, sync, executor events — that
// feed the machine and carry out what it returns.
type Agent struct {
	cfg   Config
	wake  chan struct{} // status loop: the machine changed
	nudge chan struct{} // heartbeat: another call lost its connection, beat now
	// syncNow: sync at once, not at the next jittered turn (SyncNow).
	syncNow chan struct{}
	cancel  context.CancelCauseFunc
	// mu guards the machine: taken for its work, store writes and
	// executor actions.
	mu struct {
		sync.Mutex
		m *Machine
		// writes is what withMachine hands the store: a field rather
		// than a local, whose address given to the store's Apply put a
		// Ready on the heap at every turn of every loop.
		writes Writes
	}
	// ss guards the session, apart from the machine: a heartbeat never
	// waits for the machine's work (a simulated fleet's agents waiting in
	// their executors stopped heartbeating for tens of seconds, and the
	// leader expired them).
	ss struct {
		sync.Mutex
		rng     *rand.Rand
		node    sm.NodeID
		key     string        // the join key, while node is 0
		period  time.Duration // the latest heartbeat period
		sess    *liveSession  // nil: none
		live    bool          // sess has heartbeated
		changed chan struct{} // closed and replaced when sess or live changes
	}
	logs logSubs // task output asked for by the managers (logsend.go)
	// statusQuiet: the status loop waits for a batch due at the
	// machine's EarliestDue, which no change can bring forward, so the
	// machine's work does not wake it (statusLoop).
	statusQuiet atomic.Bool
}

// liveSession is one session with the managers. Its ctx ends when the
// session is lost; every call made for it uses that ctx.
type liveSession struct {
	epoch  uint64
	node   sm.NodeID
	id     uint64
	sync   time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	// initializing counts the heartbeats answered with the node
	// initializing: the manager took the node back after a disconnect
	// this session outlived, and waits for a re-report on it.
	initializing atomic.Uint64
}

// New returns an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, wake: make(chan struct{}, 1), nudge: make(chan struct{}, 1), syncNow: make(chan struct{}, 1)}
	a.mu.m = NewMachine(MachineConfig{UrgentDelay: cfg.UrgentDelay, RoutineInterval: cfg.RoutineInterval})
	a.ss.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed>>32|1))
	a.ss.period = cfg.InitialPeriod
	a.ss.changed = make(chan struct{})
	return a, nil
}

// SyncNow makes the agent sync what it holds with the managers at once
// (as soon as it has a live session) rather than at its next turn, which
// comes after the managers' sync interval with ±50 % jitter. The sync is
// the same fenced exchange as any other: it only brings forward the
// managers' confirmation that the agent released what it no longer holds
// (addresses leave quarantine on it). Safe to call from any goroutine.
func (a *Agent) SyncNow() {
	select {
	case a.syncNow <- struct{}{}:
	default: // one is already pending
	}
}

// Run restores the local state, re-attaches to processes that survived an
// agent restart, and runs until ctx ends (nil) or the agent cannot go on
// (ErrNodeRemoved, a store failure). It leaves task processes running, and
// does not close the store or the executor.
func Run(ctx context.Context, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Run runs a; see the package function Run.
func (a *Agent) Run(ctx context.Context) error {
	st, err := a.cfg.Store.Load()
	if err != nil {
		return err
	}
	ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)
	a.ss.node, a.ss.key = st.NodeID, st.JoinKey
	if st.NodeID == 0 && st.JoinKey == "" {
		var b [16]byte
		_, _ = crand.Read(b[:])
		a.ss.key = hex.EncodeToString(b[:])
		if err := a.cfg.Store.SaveJoinKey(a.ss.key); err != nil {
			return err
		}
	}
	a.withMachine(func(m *Machine, _ time.Time) { m.Restore(st) })
	a.cfg.Executor.Sweep() // after the attaches Restore issued
	if ctx.Err() != nil {
		return result(ctx)
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){a.sessionLoop, a.assignmentsLoop, a.statusLoop, a.syncLoop, a.eventLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	wg.Wait()
	if a.cfg.StopOnExit {
		a.stopAll()
	}
	return result(ctx)
}

// stopAll stops every process the agent holds and waits (at most the
// longest stop grace plus a little) until their exits are in the store.
func (a *Agent) stopAll() {
	var grace time.Duration
	a.withMachine(func(m *Machine, now time.Time) { grace = m.StopAll(now) })
	deadline := a.cfg.Clock.NewTimer(grace + 5*time.Second)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		n := a.mu.m.Attached()
		a.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case ev := <-a.cfg.Executor.Events():
			a.withMachine(func(m *Machine, now time.Time) { m.Observe(ev, now) })
		case <-deadline.C():
			a.cfg.Logger.Warn("agent: task processes did not stop in time", "left", n)
			return
		}
	}
}

// result is Run's answer once ctx ended: nil when the caller ended it, the
// cause when the agent stopped itself.
func result(ctx context.Context) error {
	switch err := context.Cause(ctx); err {
	case context.Canceled, context.DeadlineExceeded:
		return nil
	default:
		return err
	}
}

// callCtx bounds one manager call (a transport deadline, on the real
// clock like the HTTP client's own). Its timer is set up only if the
// manager's client waits on it (internal/callctx).
func (a *Agent) callCtx(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return callctx.WithDeadline(parent, time.Now().Add(d))
}

// fail stops the agent with err.
func (a *Agent) fail(err error) { a.cancel(err) }

// withMachine runs f on the machine, then persists and carries out what the
// machine asks, under one lock so that writes reach the store in order.
func (a *Agent) withMachine(f func(m *Machine, now time.Time)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(a.mu.m, a.cfg.Clock.Now())
	rd := a.mu.m.Ready()
	if !rd.Writes.Empty() {
		a.mu.writes = rd.Writes
		err := a.cfg.Store.Apply(&a.mu.writes)
		a.mu.writes = Writes{}
		if err != nil {
			a.fail(fmt.Errorf("agent: cannot keep the local state, stopping: %w", err))
			return
		}
	}
	for _, act := range rd.Actions {
		a.cfg.Executor.Do(act)
	}
	if !a.statusQuiet.Load() {
		a.wakeStatus()
	}
}

// wakeStatus wakes the status loop.
func (a *Agent) wakeStatus() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// draw runs f with the agent's seeded random source.
func (a *Agent) draw(f func(r *rand.Rand) time.Duration) time.Duration {
	a.ss.Lock()
	defer a.ss.Unlock()
	return f(a.ss.rng)
}

func (a *Agent) period() time.Duration {
	a.ss.Lock()
	defer a.ss.Unlock()
	return a.ss.period
}

// setSessionLocked replaces the session state and wakes every waiter.
func (a *Agent) setSessionLocked(s *liveSession, live bool) {
	a.ss.sess, a.ss.live = s, live
	close(a.ss.changed)
	a.ss.changed = make(chan struct{})
}

// waitLive waits for a session that has heartbeated and is not ending (a
// session whose context ended is still current for a moment: a loop handed
// it would fail its call at once, the poll now included, and go round).
func (a *Agent) waitLive(ctx context.Context) (*liveSession, error) {
	for {
		a.ss.Lock()
		s, live, ch := a.ss.sess, a.ss.live, a.ss.changed
		a.ss.Unlock()
		if s != nil && live && s.ctx.Err() == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// sleep waits d on the agent's clock; it returns false if ctx or the
// session (when s is not nil) ended first.
func (a *Agent) sleep(ctx context.Context, s *liveSession, d time.Duration) bool {
	on, _ := a.sleepUnless(ctx, s, d, nil, nil)
	return on
}

// loopTimer is the timer a loop keeps between its waits (a heartbeat's
// wait for the next beat, a sync's for the next sync, the status loop's
// for its next batch): one timer per loop instead of a new one at every
// wait, which idle agents made at every heartbeat.
type loopTimer struct{ t clock.Timer }

// after starts the timer to fire after d and returns its channel.
func (l *loopTimer) after(c clock.Clock, d time.Duration) <-chan time.Time {
	if l.t == nil {
		l.t = c.NewTimer(d)
	} else {
		l.t.Reset(d)
	}
	return l.t.C()
}

// stop stops the timer, if it runs.
func (l *loopTimer) stop() {
	if l.t != nil {
		l.t.Stop()
	}
}

// sleepUnless is sleep that also ends early when wake fires (woken); it
// waits on lt (nil: a timer of its own).
func (a *Agent) sleepUnless(ctx context.Context, s *liveSession, d time.Duration, wake <-chan struct{}, lt *loopTimer) (on, woken bool) {
	if lt == nil {
		lt = new(loopTimer)
	}
	fired := lt.after(a.cfg.Clock, d)
	defer lt.stop()
	var lost <-chan struct{}
	if s != nil {
		lost = s.ctx.Done()
	}
	select {
	case <-fired:
		return true, false
	case <-wake:
		return true, true
	case <-ctx.Done():
	case <-lost:
	}
	return false, false
}

// failed sorts out an error from a manager call made for session s: the
// session is lost (unknown_session), the node is gone (node_removed: the
// agent stops), or it is worth a retry. It reports whether the caller
// should retry within the same session.
func (a *Agent) failed(ctx context.Context, s *liveSession, what string, err error) bool {
	switch {
	case ctx.Err() != nil || s.ctx.Err() != nil:
		return false
	case code(err) == wire.CodeNodeRemoved:
		a.fail(ErrNodeRemoved)
		return false
	case code(err) == wire.CodeUnknownSession:
		a.cfg.Logger.Info("agent: session lost", "call", what, "err", err)
		s.cancel()
		return false
	}
	a.cfg.Logger.Warn("agent: manager call failed", "call", what, "err", err)
	if code(err) == "" && what != "heartbeat" {
		// No answer at all (the manager died or the connection broke):
		// the heartbeat finds out now where the leader is instead of at
		// its next period, so a leader's death costs the fleet the
		// election, not the election plus up to a period.
		select {
		case a.nudge <- struct{}{}:
		default:
		}
	}
	return true
}

// eventLoop feeds executor events to the machine. Events that arrive
// together are applied together, so their store writes share one commit
// (one fsync when they carry new statuses).
func (a *Agent) eventLoop(ctx context.Context) {
	const maxGroup = 256
	evs := make([]Event, 0, maxGroup)
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-a.cfg.Executor.Events():
			evs = append(evs[:0], ev)
		}
	drain:
		for len(evs) < maxGroup {
			select {
			case ev := <-a.cfg.Executor.Events():
				evs = append(evs, ev)
			default:
				break drain
			}
		}
		a.withMachine(func(m *Machine, now time.Time) {
			for _, ev := range evs {
				m.Observe(ev, now)
			}
		})
	}
}
