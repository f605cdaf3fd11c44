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
		calls    map[int]context.CancelFunc
		next     int
	}
}

var errPartitioned = fmt.Errorf("%w: partitioned by the loadgen", client.ErrUnreachable)

// begin derives a call context that a partition cuts; done releases it.
func (m *manager) begin(ctx context.Context) (context.Context, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Now().Before(m.mu.cutUntil) {
		return nil, nil, errPartitioned
	}
	ctx, cancel := context.WithCancel(ctx)
	id := m.mu.next
	m.mu.next++
	if m.mu.calls == nil {
		m.mu.calls = map[int]context.CancelFunc{}
	}
	m.mu.calls[id] = cancel
	return ctx, func() {
		m.mu.Lock()
		delete(m.mu.calls, id)
		m.mu.Unlock()
		cancel()
	}, nil
}

// cut partitions the agent for d and cuts its calls in flight.
func (m *manager) cut(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.cutUntil = time.Now().Add(d)
	for _, c := range m.mu.calls {
		c()
	}
	m.live.Store(false)
}

func call[T any](m *manager, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var zero T
	c, done, err := m.begin(ctx)
	if err != nil {
		return zero, err
	}
	defer done()
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
	if err == nil && m.obs != nil {
		now := m.clk.Now()
		for i := range a.Tasks {
			m.obs.Handed(uint32(req.NodeID), uint64(a.Tasks[i].Task), now)
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
		running map[sm.TaskID]bool // started, no operation since
	}
}

func newExecutor(inner *agent.SimExecutor, obs Observer, node *atomic.Uint32, clk clock.Clock) *executor {
	e := &executor{inner: inner, obs: obs, node: node, clk: clk}
	e.mu.running = map[sm.TaskID]bool{}
	inner.Watch(e.saw)
	return e
}

func (e *executor) Do(a agent.Action) {
	switch a.Op {
	case agent.OpPrepare, agent.OpStart:
		if a.Run != nil && e.obs != nil {
			nets := make([]string, len(a.Run.Addresses))
			addrs := make([]string, len(a.Run.Addresses))
			for i, ad := range a.Run.Addresses {
				nets[i], addrs[i] = ad.Network, ad.Addr
			}
			e.obs.Hold(e.node.Load(), uint64(a.Task), nets, addrs, e.clk.Now())
		}
	case agent.OpForget:
		if e.obs != nil {
			e.obs.Release(uint64(a.Task), e.clk.Now())
		}
	}
	e.mu.Lock()
	delete(e.mu.running, a.Task)
	e.mu.Unlock()
	e.inner.Do(a)
}

// saw follows an event of the simulated executor on its way to the runner.
func (e *executor) saw(ev agent.Event) {
	e.mu.Lock()
	if ev.Obs.Kind == agent.ObsStarted {
		e.mu.running[ev.Task] = true
	} else {
		delete(e.mu.running, ev.Task)
	}
	e.mu.Unlock()
}

// crash makes up to n running tasks exit with code 137; it returns how
// many.
func (e *executor) crash(n int, r *rand.Rand) int {
	e.mu.Lock()
	ids := make([]sm.TaskID, 0, len(e.mu.running))
	for id := range e.mu.running {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	if len(ids) > n {
		ids = ids[:n]
	}
	for _, id := range ids {
		delete(e.mu.running, id)
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
