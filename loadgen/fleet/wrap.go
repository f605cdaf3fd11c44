package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"shoal/agent"
	"shoal/api/client"
	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// Observer is told what the agents see and hold (check.Checker).
type Observer interface {
	Handed(node uint32, task uint64, now time.Time)
	Hold(node uint32, task uint64, networks, addrs []string, now time.Time)
	Release(task uint64, now time.Time)
}

// handedAll is an Observer told an assignments answer's tasks at once, in
// order: the same as Handed for each.
type handedAll interface {
	HandedAll(node uint32, tasks []wire.Assignment, now time.Time)
}

// manager wraps the shared agent client of one simulated agent: it can be
// partitioned, and reports what the agent is handed.
type manager struct {
	inner *client.AgentClient
	obs   Observer
	node  *atomic.Uint32
	live  *atomic.Bool // the last heartbeat succeeded
	ok    atomic.Int64 // when a heartbeat last succeeded (unix ns, by clk)
	// first is when the first heartbeat at or after *mark succeeded
	// (unix ns, by clk; below *mark: none yet): FirstBeats.
	first atomic.Int64
	mark  *atomic.Int64 // the fleet's, shared by its agents
	clk   clock.Clock
	mu    struct {
		sync.Mutex
		cutUntil time.Time
		cuts     uint64                     // partitions begun so far
		calls    map[int]context.CancelFunc // calls waiting on their context
		next     int
	}
}

var errPartitioned = fmt.Errorf("%w: partitioned by the loadgen", client.ErrUnreachable)

// begin derives a call context that a partition cuts; end it with end.
func (m *manager) begin(ctx context.Context) (*cutContext, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Now().Before(m.mu.cutUntil) {
		return nil, errPartitioned
	}
	return &cutContext{parent: ctx, m: m, cuts: m.mu.cuts}, nil
}

// cut partitions the agent for d and cuts its calls in flight.
func (m *manager) cut(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.cutUntil = time.Now().Add(d)
	m.mu.cuts++
	for _, c := range m.mu.calls {
		c()
	}
	m.live.Store(false)
}

// cutSince reports whether the agent was cut since its cuts-th cut.
func (m *manager) cutSince(cuts uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.cuts != cuts
}

// cutContext is a call's context: its parent's, ended by a partition
// (manager.cut) begun after the call. Only a call that waits on Done (an
// assignments poll, a short call waiting for its turn) gets a
// context.WithCancel registered with the manager; the others learn of a
// cut from Err. A WithCancel and a registration per call were 3 % of the
// simulated agents' CPU in a ramp, and made the agent's own call context
// set up the timer it otherwise does without.
type cutContext struct {
	parent context.Context
	m      *manager
	cuts   uint64 // m's cuts when the call began

	mu    sync.Mutex
	real  context.Context // set up by the first Done
	stop  context.CancelFunc
	id    int
	ended bool
}

func (c *cutContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *cutContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.stop = context.WithCancel(c.parent)
		m := c.m
		m.mu.Lock()
		if c.ended || m.mu.cuts != c.cuts {
			c.stop()
		} else {
			c.id = m.mu.next
			m.mu.next++
			if m.mu.calls == nil {
				m.mu.calls = map[int]context.CancelFunc{}
			}
			m.mu.calls[c.id] = c.stop
		}
		m.mu.Unlock()
	}
	return c.real.Done()
}

func (c *cutContext) Err() error {
	c.mu.Lock()
	real, ended := c.real, c.ended
	c.mu.Unlock()
	switch {
	case real != nil:
		return real.Err()
	case ended:
		return context.Canceled
	case c.m.cutSince(c.cuts):
		return context.Canceled
	}
	return c.parent.Err()
}

func (c *cutContext) Value(key any) any {
	c.mu.Lock()
	real := c.real
	c.mu.Unlock()
	if real != nil {
		return real.Value(key)
	}
	return c.parent.Value(key)
}

// end ends the call's context (the call is done).
func (c *cutContext) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if c.real != nil {
		c.m.mu.Lock()
		delete(c.m.mu.calls, c.id)
		c.m.mu.Unlock()
		c.stop()
	}
}

func call[T any](m *manager, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var zero T
	c, err := m.begin(ctx)
	if err != nil {
		return zero, err
	}
	defer c.end()
	v, err := f(c)
	if err != nil && c.Err() != nil && ctx.Err() == nil {
		return zero, errPartitioned // cut by a partition: a transport error
	}
	return v, err
}

func (m *manager) OpenSession(ctx context.Context, req *wire.SessionRequest) (*wire.Session, error) {
	s, err := call(m, ctx, func(c context.Context) (*wire.Session, error) { return m.inner.OpenSession(c, req) })
	if err == nil {
		m.node.Store(uint32(s.NodeID))
	}
	return s, err
}

func (m *manager) Heartbeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	a, err := call(m, ctx, func(c context.Context) (*wire.HeartbeatAck, error) { return m.inner.Heartbeat(c, hb) })
	m.live.Store(err == nil)
	if err == nil {
		now := m.clk.Now().UnixNano()
		m.ok.Store(now)
		m.noteFirst(now)
	}
	return a, err
}

// noteFirst records a heartbeat that succeeded at now as the first since
// the fleet's mark, unless one was recorded already.
func (m *manager) noteFirst(now int64) {
	if m.mark == nil {
		return
	}
	mark := m.mark.Load()
	if mark == 0 || now < mark {
		return
	}
	for {
		f := m.first.Load()
		if f >= mark || m.first.CompareAndSwap(f, now) {
			return
		}
	}
}

func (m *manager) Assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error) {
	a, err := call(m, ctx, func(c context.Context) (*wire.Assignments, error) { return m.inner.Assignments(c, req) })
	if err == nil && m.obs != nil && len(a.Tasks) > 0 {
		now := m.clk.Now()
		if all, ok := m.obs.(handedAll); ok {
			all.HandedAll(uint32(req.NodeID), a.Tasks, now)
		} else {
			for i := range a.Tasks {
				m.obs.Handed(uint32(req.NodeID), uint64(a.Tasks[i].Task), now)
			}
		}
	}
	return a, err
}

func (m *manager) ReportStatus(ctx context.Context, b *wire.StatusBatch) (*wire.StatusAck, error) {
	return call(m, ctx, func(c context.Context) (*wire.StatusAck, error) { return m.inner.ReportStatus(c, b) })
}

func (m *manager) Sync(ctx context.Context, req *wire.SyncRequest) (*wire.SyncAnswer, error) {
	return call(m, ctx, func(c context.Context) (*wire.SyncAnswer, error) { return m.inner.Sync(c, req) })
}

func (m *manager) SetManagers(addrs []string) { m.inner.SetManagers(addrs) }

// executor wraps one run's SimExecutor: it tells the observer which
// addresses the agent holds, and can make running tasks crash. It follows
// which tasks run by watching the executor's events as they are queued
// (SimExecutor.Watch); the runner reads them from the executor itself.
type executor struct {
	inner *agent.SimExecutor
	obs   Observer
	clk   clock.Clock
	node  *atomic.Uint32
	mu    struct {
		sync.Mutex
		tasks map[sm.TaskID]taskMarks
	}
}

// taskMarks is what the harness knows of one task of its agent.
type taskMarks uint8

const (
	// markRunning: started, no operation since.
	markRunning taskMarks = 1 << iota
	// markHeld: the observer was told the task's addresses are held (a
	// prepare or a start), and not told since that they are let go (a
	// forget). The checker takes a Hold for a task it holds as no change
	// (check.Checker.Hold), so the start after a prepare tells it
	// nothing: a second observation per task on its way to the loadgen,
	// and a lookup in a table of every task there, for nothing.
	markHeld
)

func newExecutor(inner *agent.SimExecutor, obs Observer, node *atomic.Uint32, clk clock.Clock) *executor {
	e := &executor{inner: inner, obs: obs, node: node, clk: clk}
	e.mu.tasks = map[sm.TaskID]taskMarks{}
	inner.Watch(e.saw)
	return e
}

func (e *executor) Do(a agent.Action) {
	hold := false
	e.mu.Lock()
	m, ok := e.mu.tasks[a.Task]
	switch {
	case a.Op == agent.OpForget:
		if ok {
			delete(e.mu.tasks, a.Task)
		}
	case (a.Op == agent.OpPrepare || a.Op == agent.OpStart) && a.Run != nil && e.obs != nil:
		hold = m&markHeld == 0
		e.mu.tasks[a.Task] = m&^markRunning | markHeld
	case m&markRunning != 0:
		e.mu.tasks[a.Task] = m &^ markRunning
	}
	e.mu.Unlock()
	switch {
	case hold:
		n := len(a.Run.Addresses)
		both := make([]string, 2*n) // one allocation for both lists
		nets, addrs := both[:n:n], both[n:]
		for i, ad := range a.Run.Addresses {
			nets[i], addrs[i] = ad.Network, ad.Addr
		}
		e.obs.Hold(e.node.Load(), uint64(a.Task), nets, addrs, e.clk.Now())
	case a.Op == agent.OpForget && e.obs != nil:
		e.obs.Release(uint64(a.Task), e.clk.Now())
	}
	e.inner.Do(a)
}

// saw follows an event of the simulated executor on its way to the runner.
func (e *executor) saw(ev agent.Event) {
	e.mu.Lock()
	m, ok := e.mu.tasks[ev.Task]
	switch {
	case ev.Obs.Kind == agent.ObsStarted:
		e.mu.tasks[ev.Task] = m | markRunning
	case ok && m&markRunning != 0:
		e.mu.tasks[ev.Task] = m &^ markRunning
	}
	e.mu.Unlock()
}

// crash makes up to n running tasks exit with code 137; it returns how
// many.
func (e *executor) crash(n int, r *rand.Rand) int {
	e.mu.Lock()
	var ids []sm.TaskID
	for id, m := range e.mu.tasks {
		if m&markRunning != 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	if len(ids) > n {
		ids = ids[:n]
	}
	for _, id := range ids {
		e.mu.tasks[id] &^= markRunning
	}
	e.mu.Unlock()
	for _, id := range ids { // outside e.mu: the executor tells saw
		e.inner.Inject(agent.Event{Task: id, Obs: agent.Observation{Kind: agent.ObsExited, ExitCode: 137,
			Message: "loadgen: crashed"}})
	}
	return len(ids)
}

func (e *executor) Events() <-chan agent.Event { return e.inner.Events() }
func (e *executor) Sweep()                     { e.inner.Sweep() }
func (e *executor) Close() error               { return e.inner.Close() }
