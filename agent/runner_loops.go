package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"shoal/wire"
)

// assignmentsLoop follows the node's assignments with long-polls from the
// machine's cursor. Right after a restart it asks with no wait, so tasks
// held back until the manager speaks do not wait a whole poll.
func (a *Agent) assignmentsLoop(ctx context.Context) {
	var leader string // the cluster leader the last poll answer named
	for {
		s, err := a.waitLive(ctx)
		if err != nil {
			return
		}
		a.mu.Lock()
		req := &wire.AssignmentsRequest{NodeID: s.node, SessionID: s.id, Cursor: a.mu.m.Cursor(), Wait: int64(a.cfg.PollWait)}
		if !a.mu.m.Current() {
			req.Wait = 0
		}
		a.mu.Unlock()
		// The poll ends with the agent, not with the session: a poll
		// given up holds its connection until the manager answers, so a
		// fleet losing its sessions at once would hold a second poll
		// each meanwhile, against managers' connection caps.
		c, cancel := a.callCtx(ctx, time.Duration(req.Wait)+a.cfg.CallTimeout)
		asked := a.cfg.Clock.Now()
		f, err := a.cfg.Manager.Assignments(c, req)
		cancel()
		if err != nil {
			if a.failed(ctx, s, "assignments", err) {
				p, ra := a.period(), retryAfter(err)
				a.sleep(ctx, s, a.draw(func(r *rand.Rand) time.Duration { return max(uniform(r, p/2, p), ra) }))
			}
			continue
		}
		a.leaderNamed(&leader, f.Leader, req.Wait > 0 && a.cfg.Clock.Now().Sub(asked) < time.Duration(req.Wait))
		var aerr error
		stale := false
		a.withMachine(func(m *Machine, now time.Time) {
			// A poll asked in a session that has ended since is
			// dropped: a new session began with the machine dropping
			// the specs no task used (SessionOpened), while the old
			// session's answer leaves out every spec that session
			// sent before, so a task in it found no spec and was
			// rejected (the ramp then went round assigning it to
			// node after node). The poll is asked again on the live
			// session, which sends every spec its frames need.
			if s.ctx.Err() != nil {
				stale = true
				return
			}
			aerr = m.Apply(f, now)
		})
		if stale {
			continue
		}
		if aerr != nil {
			a.cfg.Logger.Warn("agent: assignments frame refused; asking for the whole set", "err", aerr)
		}
		if len(f.Logs) > 0 {
			a.subscribeLogs(ctx, s.node, f.Logs)
		}
	}
}

// statusLoop sends status batches. On every new session, and whenever a
// heartbeat finds the node initializing on a session that outlived a
// disconnect, it first sends everything owed and then the re-report marker
// listing every held task; then it batches: urgent changes UrgentDelay after the last send, the rest
// RoutineInterval after it.
func (a *Agent) statusLoop(ctx context.Context) {
	var reported uint64 // epoch of the last session re-reported on
	var asked uint64    // on it, the initializing answers the last re-report covered
	var lt loopTimer
	for {
		s, err := a.waitLive(ctx)
		if err != nil {
			return
		}
		if s.epoch != reported || s.initializing.Load() != asked {
			n := s.initializing.Load()
			done, err := a.reReport(ctx, s)
			switch {
			case done:
				reported, asked = s.epoch, n
			case err == nil: // some statuses refused for now: the manager ignores the marker
				a.sleep(ctx, s, a.cfg.RoutineInterval)
			case a.failed(ctx, s, "re-report", err):
				a.sleep(ctx, s, a.cfg.RoutineInterval)
			}
			continue
		}
		a.mu.Lock()
		due, ok := a.mu.m.FlushDue()
		earliest := a.mu.m.EarliestDue()
		a.mu.Unlock()
		if !ok {
			select { // nothing owed: wait for a change
			case <-a.wake:
			case <-s.ctx.Done():
			case <-ctx.Done():
				return
			}
			continue
		}
		if d := due.Sub(a.cfg.Clock.Now()); d > 0 {
			// A batch due at the earliest the machine allows cannot be
			// brought forward: until then the runner's other loops change
			// the machine without waking this one (in a ramp every
			// executor event and assignments answer woke it, for nothing,
			// while it waited out the urgent delay). What is owed is read
			// again when the timer fires.
			quiet := !due.After(earliest)
			a.statusQuiet.Store(quiet)
			fired := lt.after(a.cfg.Clock, d)
			select {
			case <-fired:
				a.statusQuiet.Store(false)
				if quiet {
					continue
				}
			case <-a.wake: // maybe something more urgent
				a.statusQuiet.Store(false)
				lt.stop()
				continue
			case <-s.ctx.Done():
				a.statusQuiet.Store(false)
				lt.stop()
				continue
			case <-ctx.Done():
				a.statusQuiet.Store(false)
				lt.stop()
				return
			}
		}
		if _, err := a.sendBatch(ctx, s, false); err != nil {
			a.failed(ctx, s, "status", err) // the machine waits a full interval after a failure
		}
	}
}

// sendBatch sends one batch of owed statuses; with marker set it is the
// re-report marker and lists every held task. It reports whether the
// manager answered any report with ReportRetry.
func (a *Agent) sendBatch(ctx context.Context, s *liveSession, marker bool) (retried bool, err error) {
	a.mu.Lock()
	reports := a.mu.m.BeginBatch(a.cfg.MaxBatch)
	b := &wire.StatusBatch{NodeID: s.node, SessionID: s.id, Reports: reports}
	if marker {
		b.ReReport, b.Held = true, a.mu.m.Held()
	}
	a.mu.Unlock()
	c, cancel := a.callCtx(s.ctx, a.cfg.CallTimeout)
	ack, err := a.cfg.Manager.ReportStatus(c, b)
	cancel()
	if err == nil && ack == nil {
		err = errors.New("agent: empty answer to a status batch")
	}
	a.withMachine(func(m *Machine, now time.Time) {
		if err != nil {
			m.EndBatch(reports, nil, now)
			return
		}
		m.EndBatch(reports, ack, now)
	})
	if err != nil {
		return false, err
	}
	for i := range reports {
		res, msg := wire.ReportRetry, ""
		if i < len(ack.Results) {
			res = ack.Results[i]
		}
		if i < len(ack.Messages) {
			msg = ack.Messages[i]
		}
		switch res {
		case wire.ReportRetry:
			retried = true
		case wire.ReportRejected:
			a.cfg.Logger.Warn("agent: the manager refused a status", "task", reports[i].Task, "state", reports[i].State, "reason", msg)
		}
	}
	return retried, nil
}

// reReport sends, after a (re)connect, the statuses the manager has not
// acknowledged, in batches, the last of which carries the re-report marker
// with every held task — one batch with only the marker when nothing is
// owed. It reports done when the manager took the marker: no report of the
// marker's batch was answered ReportRetry (the manager then ignores the
// marker, and the agent sends it again).
func (a *Agent) reReport(ctx context.Context, s *liveSession) (done bool, err error) {
	a.mu.Lock()
	batches := a.mu.m.Unacked()/a.cfg.MaxBatch + 1
	a.mu.Unlock()
	for i := 1; ; i++ {
		a.mu.Lock()
		last := i >= batches || a.mu.m.owedIdle() <= a.cfg.MaxBatch
		a.mu.Unlock()
		retried, err := a.sendBatch(ctx, s, last)
		if err != nil || last {
			return err == nil && !retried, err
		}
	}
}

// syncLoop sends, every sync interval ±50 % (or at once after SyncNow),
// the last applied sequence numbers and every held task, and destroys
// what the answer lists.
func (a *Agent) syncLoop(ctx context.Context) {
	var lt loopTimer
	for {
		s, err := a.waitLive(ctx)
		if err != nil {
			return
		}
		d := a.draw(func(r *rand.Rand) time.Duration { return jitter(s.sync, 0.5, r) })
		if on, _ := a.sleepUnless(ctx, s, d, a.syncNow, &lt); !on {
			continue
		}
		a.mu.Lock()
		req := &wire.SyncRequest{NodeID: s.node, SessionID: s.id, Seqs: a.mu.m.Seqs(), Held: a.mu.m.Held()}
		a.mu.Unlock()
		c, cancel := a.callCtx(s.ctx, a.cfg.CallTimeout)
		ans, err := a.cfg.Manager.Sync(c, req)
		cancel()
		if err != nil {
			a.failed(ctx, s, "sync", err)
			continue
		}
		if len(ans.Destroy) > 0 {
			a.withMachine(func(m *Machine, now time.Time) { m.Destroy(ans.Destroy, now) })
		}
	}
}
