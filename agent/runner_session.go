package agent

import (
	"context"
	"math/rand/v2"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

// sessionLoop opens sessions and heartbeats on them. After a session is
// lost it reconnects with storm control (reconnectDelay); a node the
// cluster removed stops the agent.
func (a *Agent) sessionLoop(ctx context.Context) {
	var epoch uint64
	attempt, lost := 0, false
	var ra time.Duration
	for ctx.Err() == nil {
		if lost || attempt > 0 {
			p := a.period()
			d := a.draw(func(r *rand.Rand) time.Duration { return reconnectDelay(attempt, p, a.cfg.MaxBackoff, ra, r) })
			a.cfg.Logger.Debug("agent: reconnecting", "in", d, "attempt", attempt)
			if !a.sleep(ctx, nil, d) {
				return
			}
		}
		a.ss.Lock()
		node, key := a.ss.node, a.ss.key
		a.ss.Unlock()
		if node != 0 {
			key = ""
		}
		c, cancel := a.callCtx(ctx, a.cfg.CallTimeout)
		sess, err := a.cfg.Manager.OpenSession(c, &wire.SessionRequest{NodeID: node, Node: a.cfg.Node, Key: key})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if code(err) == wire.CodeNodeRemoved {
				a.fail(ErrNodeRemoved)
				return
			}
			a.cfg.Logger.Warn("agent: cannot open a session", "err", err)
			attempt, ra = attempt+1, retryAfter(err)
			continue
		}
		if sess.NodeID != node {
			if err := a.cfg.Store.SaveNodeID(sess.NodeID); err != nil {
				a.fail(err)
				return
			}
			a.cfg.Logger.Info("agent: joined the cluster", "node", sess.NodeID)
		}
		if len(sess.Managers) > 0 {
			a.cfg.Manager.SetManagers(sess.Managers)
		}
		epoch++
		s := a.begin(ctx, epoch, sess)
		attempt, lost, ra = 0, true, 0
		a.heartbeat(ctx, s, time.Duration(sess.HeartbeatPeriod))
		s.cancel()
		a.ss.Lock()
		if a.ss.sess == s {
			a.setSessionLocked(nil, false)
		}
		a.ss.Unlock()
	}
}

// begin makes sess the current session.
func (a *Agent) begin(ctx context.Context, epoch uint64, sess *wire.Session) *liveSession {
	s := &liveSession{epoch: epoch, node: sess.NodeID, id: sess.SessionID, sync: time.Duration(sess.SyncInterval)}
	if s.sync <= 0 {
		s.sync = a.cfg.DefaultSyncInterval
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	a.withMachine(func(m *Machine, _ time.Time) { m.SessionOpened() })
	a.ss.Lock()
	a.ss.node = sess.NodeID
	if sess.HeartbeatPeriod > 0 {
		a.ss.period = time.Duration(sess.HeartbeatPeriod)
	}
	a.setSessionLocked(s, false)
	a.ss.Unlock()
	return s
}

// heartbeat beats at the period the manager gives, ±10 %, until the session
// is lost. The first beat goes at once: nothing else is sent on a session
// before it succeeded. Failed beats are retried quickly (the client follows
// leader changes), so a leader change costs less than one period; each
// retry may take longer than the last (heartbeatTimeout), so that when a
// whole fleet moves to a new leader at once, connections still being set
// up there are not given up and dialled again.
func (a *Agent) heartbeat(ctx context.Context, s *liveSession, period time.Duration) {
	if period <= 0 {
		period = a.period()
	}
	failures := 0
	var lt loopTimer
	for {
		c, cancel := a.callCtx(s.ctx, heartbeatTimeout(failures, period, a.cfg.CallTimeout))
		ack, err := a.cfg.Manager.Heartbeat(c, &wire.Heartbeat{NodeID: s.node, SessionID: s.id})
		cancel()
		var d time.Duration
		if err == nil {
			failures = 0
			if ack.Period > 0 {
				period = time.Duration(ack.Period)
			}
			if ack.Status == sm.NodeInitializing {
				// The manager waits for a re-report before it trusts
				// the node's tasks again. A new session sends one
				// anyway; a session that outlived a disconnect (a
				// partition shorter than the session) sends one now.
				s.initializing.Add(1)
				a.wakeStatus()
			}
			a.ss.Lock()
			a.ss.period = period
			if a.ss.sess == s && !a.ss.live {
				a.setSessionLocked(s, true)
			}
			a.ss.Unlock()
			d = a.draw(func(r *rand.Rand) time.Duration { return jitter(period, 0.1, r) })
			if !a.beatWait(ctx, s, d, period, &lt) {
				return
			}
			continue
		} else {
			if !a.failed(ctx, s, "heartbeat", err) {
				return
			}
			failures++
			ra := retryAfter(err)
			d = a.draw(func(r *rand.Rand) time.Duration { return heartbeatRetryDelay(failures, period, ra, r) })
		}
		if !a.sleep(ctx, s, d) {
			return
		}
	}
}

// leaderNamed notes the cluster leader a poll answer named (named; ""
// names none) after the one named before (*last). When the leader
// changed, the heartbeat goes now, after beatWait's jitter of up to a
// tenth of the period, instead of at its next period: a manager answers
// its parked polls when the leadership moves, so this is how most of a
// fleet learns of a new leader, and until its first beat there the new
// leader does not hear the node. Left to their period, a fleet of 10,000
// agents (a 5 s period) came back to a new leader over a whole period
// after the election (half of it 2.5-5.4 s after the kill, 90 % by
// 4.7-6.8 s: the period's uniform spread), and those whose beat fell
// late in it were the failover's last. The beat goes to the agent's
// current manager, on the connection it already holds there, and a
// follower relays it to the leader in a batch: bringing it forward costs
// no connection. (Before the relay every brought-forward beat went to the
// new leader directly, a TLS handshake each at once, and this was taken
// back after it slowed 1M/10k ramps that had elections in them.)
//
// early says the poll was answered before its wait ran out: a parked
// poll answered early that names a leader was woken by the leadership
// moving, so it brings the heartbeat forward even when it is the first
// answer of the session to name one. Polls in a ramp mostly come back
// with changes, which name no leader; a fleet whose first named leader
// came with the kill did not beat sooner (a 1,000-agent failover at a 5 s
// period: half the agents back 5.05 s after the kill, as without the
// nudge). A poll that waited its whole wait names the leader as it was:
// the first such answer only notes it.
func (a *Agent) leaderNamed(last *string, named string, early bool) {
	if named == "" {
		return
	}
	if named != *last && (*last != "" || early) {
		select {
		case a.nudge <- struct{}{}:
		default:
		}
	}
	*last = named
}

// beatWait waits d before the next heartbeat, or less if another call
// lost its connection meanwhile (a nudge): then the beat goes after a
// jitter of up to a tenth of the period, so a fleet that lost its leader
// does not dial the next one in one instant. It reports whether the
// session is still on.
func (a *Agent) beatWait(ctx context.Context, s *liveSession, d, period time.Duration, lt *loopTimer) bool {
	select {
	case <-a.nudge: // from before this beat succeeded: nothing new
	default:
	}
	on, woken := a.sleepUnless(ctx, s, d, a.nudge, lt)
	if woken {
		return a.sleep(ctx, s, a.draw(func(r *rand.Rand) time.Duration { return uniform(r, 0, period/10) }))
	}
	return on
}
