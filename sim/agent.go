package sim

import (
	"errors"
	"fmt"
	"time"

	"shoal/agent"
	"shoal/internal/clock"
	"shoal/statemachine"
	"shoal/wire"
)

// simAgent is one agent: a real agent.Machine with the simulated executor
// (stepped) and an in-memory store, driven the way agent.Agent's loops
// drive it (one session at a time; a heartbeat first; then the
// assignments long-poll, the status batches with the re-report marker
// first on every session, and the jittered sync), each loop a timer on
// the simulation's clock instead of a goroutine.
type simAgent struct {
	w     *World
	name  string
	up    bool
	gen   int // incarnation: answers to calls of an earlier one are dropped
	key   string
	node  statemachine.NodeID
	store *agent.MemStore
	exec  *agent.SimExecutor
	m     *agent.Machine
	// holding: tasks whose addresses the checker counts held here.
	holding map[statemachine.TaskID]bool

	sess     *wire.Session
	epoch    uint64
	live     bool
	reported uint64 // the epoch whose re-report the manager took
	// initializing counts heartbeats answered with the node initializing
	// (a session that outlived a disconnect); asked is that count when
	// the last re-report the manager took began.
	initializing, asked uint64
	attempt             int
	period              time.Duration
	heard               time.Time // when the agent last got a heartbeat's answer (or started)

	opening, beating, polling, sending, syncing bool
	hbT, pollT, flushT, syncT                   clock.Timer
}

// Agent timings (the runner's defaults, shortened where a script reads
// better).
const (
	callTimeout  = 5 * time.Second
	pollWait     = 30 * time.Second
	retryBackoff = time.Second
)

func (a *simAgent) desc() wire.NodeDescription {
	return wire.NodeDescription{Hostname: a.name, CPU: 64000, Memory: 64 << 30, AgentVersion: "sim"}
}

// start (re)starts the agent: from its store (a restart), or afresh (a
// new agent, or wipe: its machine lost its disk and its processes).
func (a *simAgent) start(wipe bool) {
	a.stopTimers()
	a.gen++
	a.sess, a.live, a.opening, a.beating, a.polling, a.sending, a.syncing = nil, false, false, false, false, false, false
	a.attempt, a.period = 0, 5*time.Second
	if a.heard.IsZero() || wipe {
		a.heard = a.w.clk.Now() // a restart hears nothing from the managers
	}
	if a.store == nil || wipe {
		a.releaseAll()
		a.store = agent.NewMemStore()
		a.exec = agent.NewSteppedSimExecutor(a.w.clk, a.w.simConfig())
		a.key = fmt.Sprintf("%s-%d", a.name, a.gen)
		a.node = 0
	} else {
		a.exec = a.exec.Reopen()
	}
	st, err := a.store.Load()
	if err != nil {
		panic(err) // the in-memory store never fails
	}
	if st.NodeID != 0 {
		a.node = st.NodeID
	}
	a.m = agent.NewMachine(agent.MachineConfig{})
	a.up = true
	a.with(func(m *agent.Machine, _ time.Time) { m.Restore(st) })
	a.openSession(0)
}

func (a *simAgent) stopTimers() {
	for _, t := range []clock.Timer{a.hbT, a.pollT, a.flushT, a.syncT} {
		if t != nil {
			t.Stop()
		}
	}
	a.hbT, a.pollT, a.flushT, a.syncT = nil, nil, nil, nil
}

// releaseAll tells the checker the agent holds nothing any more (its
// processes died with its machine).
func (a *simAgent) releaseAll() {
	for id := range a.holding {
		a.w.chk.Release(uint64(id), a.w.clk.Now())
	}
	a.holding = map[statemachine.TaskID]bool{}
}

// after runs f after d on the agent's current incarnation.
func (a *simAgent) after(d time.Duration, f func()) clock.Timer {
	gen := a.gen
	return a.w.clk.AfterFunc(d, func() {
		if a.gen == gen && a.up {
			f()
		}
	})
}

// call sends req on the network; done runs with the answer, or an error
// after callTimeout, on this incarnation only.
func (a *simAgent) call(req wire.Message, timeout time.Duration, done func(wire.Message, error)) {
	gen := a.gen
	a.w.net.call(a.name, req, timeout, func(resp wire.Message, err error) {
		if a.gen == gen && a.up {
			done(resp, err)
		}
	})
}

// with runs f on the machine, then persists and carries out what it asks
// (agent.Agent.withMachine), telling the checker what the agent holds.
func (a *simAgent) with(f func(m *agent.Machine, now time.Time)) {
	now := a.w.clk.Now()
	f(a.m, now)
	rd := a.m.Ready()
	if !rd.Writes.Empty() {
		if err := a.store.Apply(&rd.Writes); err != nil {
			panic(err)
		}
	}
	for _, act := range rd.Actions {
		switch act.Op {
		case agent.OpPrepare, agent.OpStart:
			if act.Run != nil {
				nets := make([]string, len(act.Run.Addresses))
				addrs := make([]string, len(act.Run.Addresses))
				for i, ad := range act.Run.Addresses {
					nets[i], addrs[i] = ad.Network, ad.Addr
				}
				a.w.chk.Hold(uint32(a.node), uint64(act.Task), nets, addrs, now)
				a.holding[act.Task] = true
			}
		case agent.OpForget:
			a.w.chk.Release(uint64(act.Task), now)
			delete(a.holding, act.Task)
		}
		a.exec.Do(act)
	}
	a.kickStatus()
}

// observe feeds the executor's events to the machine.
func (a *simAgent) observe() {
	if !a.up {
		return
	}
	evs := a.exec.TakeEvents()
	if len(evs) == 0 {
		return
	}
	a.with(func(m *agent.Machine, now time.Time) {
		for _, ev := range evs {
			m.Observe(ev, now)
		}
	})
}

func (a *simAgent) openSession(d time.Duration) {
	if a.opening {
		return
	}
	a.opening = true
	a.after(d, func() {
		key := a.key
		if a.node != 0 {
			key = ""
		}
		a.call(&wire.SessionRequest{NodeID: a.node, Node: a.desc(), Key: key}, callTimeout, func(resp wire.Message, err error) {
			a.opening = false
			if err != nil {
				if code(err) == wire.CodeNodeRemoved {
					a.up = false
					return
				}
				a.attempt++
				a.openSession(a.w.jitter(retryBackoff*time.Duration(min(a.attempt, 8)), 0.5))
				return
			}
			s := resp.(*wire.Session)
			if s.NodeID != a.node {
				a.node = s.NodeID
				_ = a.store.SaveNodeID(s.NodeID)
			}
			a.attempt = 0
			a.epoch++
			a.sess, a.live = s, false
			if s.HeartbeatPeriod > 0 {
				a.period = time.Duration(s.HeartbeatPeriod)
			}
			a.with(func(m *agent.Machine, _ time.Time) { m.SessionOpened() })
			a.beat(0)
		})
	})
}

func (a *simAgent) beat(d time.Duration) {
	if a.hbT != nil {
		a.hbT.Stop()
	}
	a.hbT = a.after(d, func() {
		if a.beating || a.sess == nil {
			return
		}
		a.beating = true
		s := a.sess
		a.call(&wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID}, callTimeout, func(resp wire.Message, err error) {
			a.beating = false
			if a.sess != s {
				return
			}
			if err != nil {
				if code(err) == wire.CodeNodeRemoved {
					a.up = false
					return
				}
				a.beat(a.w.jitter(a.period/4, 0.5))
				return
			}
			ack := resp.(*wire.HeartbeatAck)
			a.heard = a.w.clk.Now()
			if ack.Period > 0 {
				a.period = time.Duration(ack.Period)
			}
			if ack.Status == statemachine.NodeInitializing {
				a.initializing++ // as agent.Agent's heartbeat: re-report on this session
			}
			if !a.live {
				a.live = true
				a.poll(0)
				a.syncLater()
			}
			a.kickStatus()
			a.beat(a.w.jitter(a.period, 0.1))
		})
	})
}

func (a *simAgent) poll(d time.Duration) {
	if a.pollT != nil {
		a.pollT.Stop()
	}
	a.pollT = a.after(d, func() {
		if a.polling || !a.live {
			return
		}
		a.polling = true
		s := a.sess
		req := &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID, Cursor: a.m.Cursor(), Wait: int64(pollWait)}
		if !a.m.Current() {
			req.Wait = 0
		}
		a.call(req, time.Duration(req.Wait)+callTimeout, func(resp wire.Message, err error) {
			a.polling = false
			if err != nil {
				a.poll(a.w.jitter(a.period*3/4, 0.33))
				return
			}
			f := resp.(*wire.Assignments)
			now := a.w.clk.Now()
			for i := range f.Tasks {
				a.w.chk.Handed(uint32(a.node), uint64(f.Tasks[i].Task), now)
			}
			a.with(func(m *agent.Machine, now time.Time) { _ = m.Apply(f, now) })
			a.poll(0)
		})
	})
}

// kickStatus sends what is owed now or arms the flush timer for when it
// is due.
func (a *simAgent) kickStatus() {
	if !a.live || a.sending {
		return
	}
	if a.epoch != a.reported || a.initializing != a.asked {
		a.sendBatch(true)
		return
	}
	due, ok := a.m.FlushDue()
	if !ok {
		return
	}
	if d := due.Sub(a.w.clk.Now()); d > 0 {
		a.armFlush(d)
		return
	}
	a.sendBatch(false)
}

// armFlush looks at what is owed again after d.
func (a *simAgent) armFlush(d time.Duration) {
	if a.flushT != nil {
		a.flushT.Stop()
	}
	a.flushT = a.after(d, a.kickStatus)
}

// sendBatch sends one batch of owed statuses; with marker, every owed one
// and the re-report marker listing every held task (agent.Agent.reReport
// with an unbounded batch). After a failed send, or a marker some report
// of which is to be retried, it looks again a routine interval later.
func (a *simAgent) sendBatch(marker bool) {
	a.sending = true
	s, epoch, asked := a.sess, a.epoch, a.initializing
	reports := a.m.BeginBatch(1 << 30)
	b := &wire.StatusBatch{NodeID: s.NodeID, SessionID: s.SessionID, Reports: reports}
	if marker {
		b.ReReport, b.Held = true, a.m.Held()
	}
	a.call(b, callTimeout, func(resp wire.Message, err error) {
		var ack *wire.StatusAck
		if err == nil {
			ack = resp.(*wire.StatusAck)
		}
		a.with(func(m *agent.Machine, now time.Time) { m.EndBatch(reports, ack, now) })
		a.sending = false
		if err != nil {
			a.armFlush(time.Second)
			return
		}
		if marker {
			for i := range reports {
				if i >= len(ack.Results) || ack.Results[i] == wire.ReportRetry {
					a.armFlush(time.Second) // the manager ignored the marker
					return
				}
			}
			if a.epoch == epoch {
				a.reported, a.asked = epoch, asked
			}
		}
		a.kickStatus()
	})
}

// syncNow sends a sync at once (agent.Agent.SyncNow); seqs, when not
// nil, replaces the sequences the machine applied (a report collected
// earlier, arriving late).
func (a *simAgent) syncNow(seqs []uint64) error {
	if !a.up || !a.live {
		return fmt.Errorf("agent %s has no live session", a.name)
	}
	s := a.sess
	req := &wire.SyncRequest{NodeID: s.NodeID, SessionID: s.SessionID, Seqs: a.m.Seqs(), Held: a.m.Held()}
	if seqs != nil {
		req.Seqs = seqs
	}
	a.call(req, callTimeout, func(resp wire.Message, err error) {
		if err == nil {
			if ans := resp.(*wire.SyncAnswer); len(ans.Destroy) > 0 {
				a.with(func(m *agent.Machine, now time.Time) { m.Destroy(ans.Destroy, now) })
			}
		}
	})
	return nil
}

func (a *simAgent) syncLater() {
	if a.syncT != nil {
		a.syncT.Stop()
	}
	a.syncT = a.after(a.w.jitter(a.w.cfg.SyncInterval, 0.5), func() {
		a.syncT = nil
		if !a.live || a.syncing {
			a.syncLater()
			return
		}
		a.syncing = true
		s := a.sess
		a.call(&wire.SyncRequest{NodeID: s.NodeID, SessionID: s.SessionID, Seqs: a.m.Seqs(), Held: a.m.Held()}, callTimeout,
			func(resp wire.Message, err error) {
				a.syncing = false
				if err == nil {
					if ans := resp.(*wire.SyncAnswer); len(ans.Destroy) > 0 {
						a.with(func(m *agent.Machine, now time.Time) { m.Destroy(ans.Destroy, now) })
					}
				}
				a.syncLater()
			})
	})
}

func code(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}
