package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	sm "shoal/statemachine"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/agent"
	"shoal/api/client"
	"shoal/internal/clock"
	"shoal/wire"
)

// Config describes the fleet.
type Config struct {
	Managers []string // API addresses (host:port)
	// Token is the worker join token: each agent joins with it and speaks
	// mutual TLS with its own certificate. Empty: plain HTTP, one shared
	// connection pool.
	Token    string
	First    int // the fleet-wide index of agent 0 (a fleet split across processes)
	Agents   int
	Seed     uint64
	Sim      agent.SimConfig // stage tables; Seed is derived per agent from Seed
	Observer Observer        // nil: nothing is observed
	Logger   *slog.Logger    // the agents' logger; default: discard
	// Hostname names agent i (fleet-wide index); default "sim-%05d".
	Hostname func(i int) string
	// Slack is how many connections per manager the shared client allows
	// beyond one per agent; default 64.
	Slack int
	// CPU and Memory each simulated node offers; default 64 cores, 256 GiB.
	CPU, Memory int64
	// Clock is the agents' clock, which stamps what they observe and
	// their heartbeats' times; default the real clock (a worker's is
	// offset by its hidden --clock-offset in tests).
	Clock clock.Clock
	// StartSpread spreads the agents' first sessions over this long;
	// default 0 (all at once; the managers' storm control answers 503 +
	// Retry-After).
	StartSpread time.Duration
}

// SimLabel is the node label every simulated node carries (value "sim"),
// and OnlySimNodes the placement constraint that keeps a service on them:
// a run that joined a cluster must not place its tasks on the cluster's
// own nodes, whose agents run real processes.
const (
	SimLabel     = "shoal-loadgen"
	OnlySimNodes = "node.labels." + SimLabel + "==sim"
)

// simLabels are the labels of simulated node g: a zone (z0..z2) and
// SimLabel.
func simLabels(g int) map[string]string {
	return map[string]string{"zone": fmt.Sprintf("z%d", g%3), SimLabel: "sim"}
}

// simAgent is one simulated node.
type simAgent struct {
	idx int
	cfg agent.Config // without Manager and Executor
	// managers is the manager list, starting at a manager of its own, so
	// that the fleet's long polls spread over the replicas (heartbeats go
	// to the leader whatever the order).
	managers []string
	store    *agent.MemStore
	node     atomic.Uint32
	live     atomic.Bool
	mgr      *manager
	// With TLS, set by the agent's first run (joinTLS) and kept after.
	joined bool
	creds  *client.Credentials
	hc     *fasthttp.Client
	mu     struct {
		sync.Mutex
		sim    *agent.SimExecutor
		exec   *executor
		cancel context.CancelFunc
		done   chan struct{}
		gone   bool         // vanished
		agent  *agent.Agent // the agent of the current run, once it started
	}
}

// Fleet is the running simulated agents.
type Fleet struct {
	cfg    Config
	hc     *fasthttp.Client
	agents []*simAgent
	ctx    context.Context
	errs   atomic.Int64
	stop   sync.Once
	mark   atomic.Int64 // FirstBeats' since (unix ns by cfg.Clock; 0: none)
	rng    struct {
		sync.Mutex
		r *rand.Rand
	}
}

// Start starts cfg.Agents agents; they run until ctx ends or Stop.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Hostname == nil {
		cfg.Hostname = func(i int) string { return fmt.Sprintf("sim-%05d", i) }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Slack <= 0 {
		cfg.Slack = 64
	}
	if cfg.CPU <= 0 {
		cfg.CPU = 64_000
	}
	if cfg.Memory <= 0 {
		cfg.Memory = 256 << 30
	}
	f := &Fleet{cfg: cfg, ctx: ctx}
	if cfg.Token == "" {
		f.hc = client.SharedHTTP(cfg.Agents + cfg.Slack)
	}
	f.rng.r = rand.New(rand.NewPCG(cfg.Seed, 0xf1ee7))
	for i := range cfg.Agents {
		g := cfg.First + i
		a := &simAgent{idx: i, store: agent.NewMemStore(), managers: rotate(cfg.Managers, g)}
		a.mgr = &manager{obs: cfg.Observer, node: &a.node, live: &a.live, clk: cfg.Clock, mark: &f.mark}
		if cfg.Token == "" {
			ac, err := client.NewAgentClient(a.managers, f.hc)
			if err != nil {
				return nil, err
			}
			a.mgr.inner = ac
		}
		sim := cfg.Sim
		sim.Seed = cfg.Seed*1_000_003 + uint64(g) + 1
		a.mu.sim = agent.NewSimExecutor(cfg.Clock, sim)
		a.cfg = agent.Config{Store: a.store, Clock: cfg.Clock, Logger: cfg.Logger.With("host", cfg.Hostname(g)), Seed: sim.Seed ^ 0x5eed,
			Node: wire.NodeDescription{Hostname: cfg.Hostname(g), CPU: cfg.CPU, Memory: cfg.Memory, AgentVersion: "loadgen-sim",
				Labels: simLabels(g)}}
		f.agents = append(f.agents, a)
	}
	for i, a := range f.agents {
		var delay time.Duration
		if cfg.StartSpread > 0 && cfg.Agents > 1 {
			delay = cfg.StartSpread * time.Duration(i) / time.Duration(cfg.Agents)
		}
		f.run(a, a.mu.sim, delay)
	}
	return f, nil
}

// run starts one agent run over sim after delay.
func (f *Fleet) run(a *simAgent, sim *agent.SimExecutor, delay time.Duration) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	ex := newExecutor(sim, f.cfg.Observer, &a.node, f.cfg.Clock)
	a.mu.Lock()
	a.mu.sim, a.mu.exec, a.mu.cancel, a.mu.done, a.mu.gone, a.mu.agent = sim, ex, cancel, done, false, nil
	a.mu.Unlock()
	cfg := a.cfg
	cfg.Manager, cfg.Executor = a.mgr, ex
	go func() {
		defer close(done)
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if f.cfg.Token != "" {
			if err := f.joinTLS(ctx, a); err != nil {
				if ctx.Err() == nil {
					f.errs.Add(1)
					cfg.Logger.Error("loadgen: agent could not join", "host", cfg.Node.Hostname, "err", err)
				}
				return
			}
			go f.renew(ctx, a)
		}
		ag, err := agent.New(cfg)
		if err == nil {
			a.mu.Lock()
			a.mu.agent = ag
			a.mu.Unlock()
			err = ag.Run(ctx)
			a.mu.Lock()
			if a.mu.agent == ag {
				a.mu.agent = nil
			}
			a.mu.Unlock()
		}
		if err != nil {
			f.errs.Add(1)
			cfg.Logger.Error("loadgen: agent stopped", "host", cfg.Node.Hostname, "err", err)
		}
		// An agent that stopped is not connected, whatever its last
		// heartbeat said (nor counted in BeatAge).
		a.live.Store(false)
	}()
}

// SyncNow has every running agent sync within the next `within` (their
// turns spread evenly over it, so the managers get no burst of every
// agent's sync at once) instead of at its next turn (agent.SyncNow).
func (f *Fleet) SyncNow(within time.Duration) {
	for i, a := range f.agents {
		a.mu.Lock()
		ag := a.mu.agent
		a.mu.Unlock()
		if ag != nil {
			time.AfterFunc(within*time.Duration(i)/time.Duration(len(f.agents)), ag.SyncNow)
		}
	}
}

// now reads the agents' clock.
func (f *Fleet) now() time.Time {
	if f.cfg.Clock == nil {
		return time.Now()
	}
	return f.cfg.Clock.Now()
}

// Len returns the number of agents.
func (f *Fleet) Len() int { return len(f.agents) }

// Errors returns how many agent runs ended with an error.
func (f *Fleet) Errors() int64 { return f.errs.Load() }

// Connected counts agents whose last heartbeat succeeded.
func (f *Fleet) Connected() int {
	n := 0
	for _, a := range f.agents {
		if a.live.Load() {
			n++
		}
	}
	return n
}

// BeatAge is the longest time since its last heartbeat succeeded among
// the agents whose last heartbeat did: past three heartbeat periods the
// leader expires such an agent although nothing failed, so a large age
// says the simulated fleet (or the machine under it) cannot keep up.
func (f *Fleet) BeatAge() time.Duration {
	now, oldest := f.now().UnixNano(), int64(0)
	for _, a := range f.agents {
		if ok := a.mgr.ok.Load(); ok > 0 && a.live.Load() {
			oldest = max(oldest, now-ok)
		}
	}
	return time.Duration(oldest)
}

// Live reports, per agent, whether its last heartbeat succeeded.
func (f *Fleet) Live() []bool {
	out := make([]bool, len(f.agents))
	for i, a := range f.agents {
		out[i] = a.live.Load()
	}
	return out
}

// FirstBeats reports, per agent, when its first heartbeat at or after
// since succeeded (Unix nanoseconds by this process's clock; 0: none
// yet): after a leader kill, when it reached the new leader. The first
// call with a new since starts the record there (a heartbeat that
// succeeded between since and that call counts by its time, if it was
// the agent's last). Reading the agents' last heartbeat instead timed a
// later beat than the first whenever the read came more than a period
// after it: on a loaded machine, by seconds.
func (f *Fleet) FirstBeats(since int64) []int64 {
	if f.mark.Swap(since) != since {
		for _, a := range f.agents {
			if ok, first := a.mgr.ok.Load(), a.mgr.first.Load(); ok >= since && first < since {
				a.mgr.first.CompareAndSwap(first, ok)
			}
		}
	}
	out := make([]int64, len(f.agents))
	for i, a := range f.agents {
		if v := a.mgr.first.Load(); v >= since {
			out[i] = v
		}
	}
	return out
}

// Partition cuts agent i off the managers for d: its calls fail at once
// and its calls in flight are cut; its tasks keep running.
func (f *Fleet) Partition(i int, d time.Duration) { f.agents[i].mgr.cut(d) }

// Vanish stops agent i at once, like kill -9: nothing is flushed, its
// simulated processes keep running. It reports false if i was gone.
func (f *Fleet) Vanish(i int) bool {
	a := f.agents[i]
	a.mu.Lock()
	if a.mu.gone {
		a.mu.Unlock()
		return false
	}
	a.mu.gone = true
	cancel, done, ex := a.mu.cancel, a.mu.done, a.mu.exec
	a.mu.Unlock()
	cancel()
	<-done
	_ = ex.Close()
	a.live.Store(false)
	return true
}

// Return starts a vanished agent i again over its store, with its
// executor reopened (it re-attaches to the processes that kept running).
func (f *Fleet) Return(i int) {
	a := f.agents[i]
	a.mu.Lock()
	gone, sim := a.mu.gone, a.mu.sim
	a.mu.Unlock()
	if !gone || f.ctx.Err() != nil {
		return
	}
	f.run(a, sim.Reopen(), 0)
}

// Probe says what the agent of node keeps in its store for task (it takes
// only the store's lock): whether it still holds the task's resources.
// found is false when no agent of this fleet runs as node.
func (f *Fleet) Probe(node uint32, task uint64) (text string, found bool) {
	for _, a := range f.agents {
		if a.node.Load() != node {
			continue
		}
		conn := "connected"
		if !a.live.Load() {
			conn = "not connected"
		}
		r, ok := a.store.Task(sm.TaskID(task))
		switch {
		case !ok:
			return fmt.Sprintf("%s; its store no longer lists task %d (forgotten)", conn, task), true
		case r.Released:
			return fmt.Sprintf("%s; its store keeps task %d as released (%s)", conn, task, r.Status.State), true
		default:
			return fmt.Sprintf("%s; its store still holds task %d (%s, desired=%s, removed=%t, destroy=%t; cursor %s)",
				conn, task, r.Status.State, r.Assignment.Desired, r.Removed, r.Destroy, a.store.Cursor().Token()), true
		}
	}
	return fmt.Sprintf("no agent runs as node %d", node), false
}

// rotate returns list starting at its (i mod len)th entry.
func rotate(list []string, i int) []string {
	if len(list) == 0 {
		return nil
	}
	k := i % len(list)
	return append(slices.Clone(list[k:]), list[:k]...)
}

// Gone reports whether agent i is vanished.
func (f *Fleet) Gone(i int) bool {
	a := f.agents[i]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.gone
}

// Crash makes up to n running tasks of agent i exit with code 137.
func (f *Fleet) Crash(i, n int) int {
	a := f.agents[i]
	a.mu.Lock()
	ex, gone := a.mu.exec, a.mu.gone
	a.mu.Unlock()
	if gone {
		return 0
	}
	f.rng.Lock()
	defer f.rng.Unlock()
	return ex.crash(n, f.rng.r)
}

// Nodes returns the node IDs the cluster gave the agents (agents that have
// not registered yet are left out).
func (f *Fleet) Nodes() []uint32 {
	var out []uint32
	for _, a := range f.agents {
		if id := a.node.Load(); id != 0 {
			out = append(out, id)
		}
	}
	return out
}

// Stop stops every agent and waits for them; later calls do nothing.
func (f *Fleet) Stop() { f.stop.Do(f.stopAll) }

func (f *Fleet) stopAll() {
	var wg sync.WaitGroup
	for _, a := range f.agents {
		a.mu.Lock()
		cancel, done, ex := a.mu.cancel, a.mu.done, a.mu.exec
		a.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancel()
			<-done
			_ = ex.Close()
		}()
	}
	wg.Wait()
	for _, a := range f.agents {
		if a.mgr.inner != nil {
			a.mgr.inner.CloseIdleConnections()
		}
	}
}
