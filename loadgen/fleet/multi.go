package fleet

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// AgentsPerProcess is the most simulated agents one fleet process runs.
// With TLS each agent has a client of its own: its long poll, a heartbeat
// connection to the leader, and after a failover idle connections to the
// old leader for a while; about four each at worst. This machine allows
// 20,000 open files per process, so 10,000 agents in one process ran out
// of sockets ("too many open files") and most never connected; 2,500 per
// process stays well below.
const AgentsPerProcess = 2500

// Remote is a fleet run by child processes of AgentsPerProcess agents at
// most, and by fleet workers on other hosts; its methods are Fleet's, with
// fleet-wide agent indexes. What the agents observe reaches the observer
// once, in the order it happened across the processes (merged by stamp,
// a worker's stamps corrected by its measured clock offset): an address
// one agent released and another then took is seen released first.
//
// A process that ends before Stop (a worker that died, or lost its
// connection) is lost: its agents answer as gone and not connected, the
// observer is told that its nodes' processes are gone (NodesGone), after
// every observation it sent, and lost is called.
type Remote struct {
	kids []*child
	obs  Observer
	lost func(name string)
	mu   sync.Mutex // over the merge
	q    [][]obs    // per child, observations not yet handed on
	upto []int64    // per child, its latest promise (obsBatch.Upto), corrected
	last []int64    // per child, its latest stamp, corrected
	off  []int64    // per child, its clock offset (ns; 0 for a local child)
	// track is, per child, whether it is a worker on another host: its
	// stamps are corrected by off and its nodes noted in seen.
	track []bool
	// seen is, per child, the nodes its observations named. It has a lock
	// of its own: Probe reads it, and the checker probes while the merge
	// (under mu) hands it an observation.
	seenMu sync.Mutex
	seen   []map[uint32]bool
	stop   sync.Once
	quit   chan struct{}
}

// GoneObserver is an Observer that is told when the processes of nodes
// died with their fleet process (the checker forgets what they held).
type GoneObserver interface {
	NodesGone(nodes []uint32, now time.Time)
}

// StartRemote starts cfg.Agents agents in child processes of binary, per
// agents at most each (0: AgentsPerProcess); cfg's First and Agents are
// split among them. What they observe goes to obs (nil: nothing). The
// children's own messages go to stderr.
func StartRemote(binary string, cfg ChildConfig, per int, o Observer, stderr io.Writer) (*Remote, error) {
	return StartFleet(binary, cfg, per, cfg.Agents, nil, o, stderr, nil)
}

// StartFleet runs the first local of cfg.Agents agents in child processes
// of binary (per agents at most each) and spreads the rest evenly over
// workers (fleet workers that passed the handshake). lost is called with a
// process's name when one ends before Stop.
func StartFleet(binary string, cfg ChildConfig, per, local int, workers []*Worker, o Observer, stderr io.Writer, lost func(name string)) (*Remote, error) {
	if per <= 0 {
		per = AgentsPerProcess
	}
	if len(workers) == 0 {
		local = cfg.Agents
	}
	local = min(max(local, 0), cfg.Agents)
	nLocal := 0
	if local > 0 {
		nLocal = (local + per - 1) / per
	}
	n := nLocal + len(workers)
	r := newRemote(n, o, lost)
	fail := func(err error) (*Remote, error) {
		for _, c := range r.kids {
			if c != nil {
				c.kill()
			}
		}
		for _, w := range workers {
			w.close()
		}
		return nil, err
	}
	lo := 0
	for k := range nLocal {
		cc := cfg
		cc.First = cfg.First + lo
		cc.Agents = min(per, local-lo)
		cc.Shares = nLocal // the local processes share this machine's set-up turns
		if cfg.CPUProfile != "" {
			cc.CPUProfile = fmt.Sprintf(cfg.CPUProfile, k+1)
			if cfg.AllocsProfile != "" {
				cc.AllocsProfile = fmt.Sprintf(cfg.AllocsProfile, k+1)
			}
		}
		c, err := startChild(binary, cc, func(b obsBatch) { r.merge(k, b) }, stderr)
		if err != nil {
			return fail(err)
		}
		c.lo, c.agents, c.name = lo, cc.Agents, fmt.Sprintf("local fleet process %d", k+1)
		r.kids[k] = c
		lo += cc.Agents
	}
	rest := cfg.Agents - local
	for j, w := range workers {
		k := nLocal + j
		cc := cfg
		cc.CPUProfile, cc.AllocsProfile, cc.AgentLog = "", "", ""
		cc.Shares = 1 // a worker's host is its own
		cc.Agents = rest / len(workers)
		if j < rest%len(workers) {
			cc.Agents++
		}
		cc.First = cfg.First + lo
		r.off[k], r.track[k] = int64(w.Offset), true
		c, err := startWorker(w, cc, func(b obsBatch) { r.merge(k, b) })
		if err != nil {
			return fail(err)
		}
		c.lo, c.agents = lo, cc.Agents
		r.kids[k] = c
		lo += cc.Agents
		go r.pollCPU(c)
	}
	return r, nil
}

// newRemote is a Remote for n processes, none started yet.
func newRemote(n int, o Observer, lost func(name string)) *Remote {
	if lost == nil {
		lost = func(string) {}
	}
	r := &Remote{obs: o, lost: lost, kids: make([]*child, n), q: make([][]obs, n), upto: make([]int64, n),
		last: make([]int64, n), off: make([]int64, n), track: make([]bool, n), seen: make([]map[uint32]bool, n), quit: make(chan struct{})}
	for k := range n {
		r.seen[k] = map[uint32]bool{}
	}
	return r
}

// pollCPU reads a worker's CPU seconds every two seconds until it is lost
// or the fleet stops: what a lost worker used is its last reading.
func (r *Remote) pollCPU(c *child) {
	for {
		var s float64
		if err := c.rpc.Call("Fleet.CPU", 0, &s); err == nil {
			c.mu.Lock()
			c.mu.cpu = s
			c.mu.Unlock()
		}
		select {
		case <-r.quit:
			return
		case <-c.done:
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// merge takes child k's batch and hands on, in stamp order, every queued
// observation no child can still precede: those stamped at or before the
// lowest promise. Stamps are corrected by the child's clock offset first.
func (r *Remote) merge(k int, b obsBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A worker's stamps are corrected and its nodes noted (for when it is
	// lost); a local child's need neither, which keeps the single-machine
	// merge as cheap as it was.
	if off := r.off[k]; r.track[k] {
		r.seenMu.Lock()
		for i := range b.Obs {
			o := &b.Obs[i]
			o.Stamp -= off
			o.At -= off
			if o.Node != 0 {
				r.seen[k][o.Node] = true
			}
		}
		r.seenMu.Unlock()
	}
	if n := len(b.Obs); n > 0 {
		r.last[k] = max(r.last[k], b.Obs[n-1].Stamp)
	}
	if r.direct(k, b) {
		return
	}
	r.q[k] = append(r.q[k], b.Obs...)
	if b.Upto == math.MaxInt64 {
		// The stream ended: a child that was not stopped is lost. Its
		// processes died with it, which the observer learns after the
		// last thing it observed.
		if c := r.kids[k]; c == nil || !c.stopping.Load() {
			at := max(r.last[k], r.upto[k]) + 1
			r.q[k] = append(r.q[k], obs{Kind: obsGone, Stamp: at, At: time.Now().UnixNano()})
		}
		r.upto[k] = math.MaxInt64
	} else {
		r.upto[k] = b.Upto - r.off[k]
		r.last[k] = max(r.last[k], r.upto[k])
	}
	low := r.upto[0]
	for _, u := range r.upto {
		low = min(low, u)
	}
	for {
		next := -1
		for j, q := range r.q {
			if len(q) > 0 && q[0].Stamp <= low && (next < 0 || q[0].Stamp < r.q[next][0].Stamp) {
				next = j
			}
		}
		if next < 0 {
			return
		}
		o := r.q[next][0]
		if r.q[next] = r.q[next][1:]; len(r.q[next]) == 0 {
			r.q[next] = nil
		}
		r.deliver(next, o)
	}
}

// direct hands on child k's batch b straight from it, without queueing,
// when nothing is queued and no other child can precede any of it: every
// other child has promised past its last stamp (always so with one
// child). It reports whether it did; if not, merge queues and merges.
func (r *Remote) direct(k int, b obsBatch) bool {
	if b.Upto == math.MaxInt64 {
		return false // the end of a stream: merge's own path
	}
	upto := b.Upto - r.off[k]
	low := upto
	for j, u := range r.upto {
		if len(r.q[j]) > 0 {
			return false
		}
		if j != k {
			low = min(low, u)
		}
	}
	if n := len(b.Obs); n > 0 && b.Obs[n-1].Stamp > low {
		return false
	}
	r.upto[k] = upto
	r.last[k] = max(r.last[k], upto)
	for i := range b.Obs {
		r.deliver(k, b.Obs[i])
	}
	return true
}

func (r *Remote) deliver(k int, o obs) {
	at := time.Unix(0, o.At)
	if o.Kind == obsGone {
		c := r.kids[k]
		name := fmt.Sprintf("fleet process %d", k+1)
		if c != nil {
			c.dead.Store(true)
			name = c.name
		}
		var nodes []uint32
		r.seenMu.Lock()
		for n := range r.seen[k] {
			nodes = append(nodes, n)
		}
		r.seenMu.Unlock()
		if g, ok := r.obs.(GoneObserver); ok {
			g.NodesGone(nodes, at)
		}
		r.lost(name)
		return
	}
	if r.obs == nil {
		return
	}
	switch o.Kind {
	case obsHanded:
		r.obs.Handed(o.Node, o.Task, at)
	case obsHold:
		r.obs.Hold(o.Node, o.Task, o.Nets, o.Addrs, at)
	case obsRelease:
		r.obs.Release(o.Task, at)
	}
}

// at returns the child running agent i and its index there.
func (r *Remote) at(i int) (*child, int) {
	for _, c := range r.kids {
		if i >= c.lo && i < c.lo+c.agents {
			return c, i - c.lo
		}
	}
	return r.kids[len(r.kids)-1], 0
}

func (r *Remote) Partition(i int, d time.Duration) {
	c, j := r.at(i)
	rpcCall[bool](c, "Partition", PartitionArgs{I: j, D: d})
}

// Vanish, Return, Gone and Crash of an agent of a lost process: it is
// gone for good (Vanish reports false: not made to vanish now).
func (r *Remote) Vanish(i int) bool { c, j := r.at(i); return rpcCall[bool](c, "Vanish", j) }
func (r *Remote) Return(i int)      { c, j := r.at(i); rpcCall[bool](c, "Return", j) }
func (r *Remote) Gone(i int) bool {
	c, j := r.at(i)
	return c.dead.Load() || rpcCall[bool](c, "Gone", j)
}
func (r *Remote) Crash(i, n int) int {
	c, j := r.at(i)
	return rpcCall[int](c, "Crash", CrashArgs{I: j, N: n})
}

// each asks every child, at once, and returns their answers in order.
func each[R any](r *Remote, method string, args any) []R {
	out := make([]R, len(r.kids))
	var wg sync.WaitGroup
	for k, c := range r.kids {
		wg.Add(1)
		go func() { defer wg.Done(); out[k] = rpcCall[R](c, method, args) }()
	}
	wg.Wait()
	return out
}

func (r *Remote) Connected() int {
	n := 0
	for _, x := range each[int](r, "Connected", 0) {
		n += x
	}
	return n
}

func (r *Remote) BeatAge() time.Duration {
	var d time.Duration
	for _, x := range each[time.Duration](r, "BeatAge", 0) {
		d = max(d, x)
	}
	return d
}

// SyncNow has every agent of every child sync within the next `within`.
func (r *Remote) SyncNow(within time.Duration) { each[bool](r, "SyncNow", within) }

// Profile has every local child end its CPU profile's window and start
// the named one (ChildConfig.CPUProfile); workers profile nothing.
func (r *Remote) Profile(window string) error {
	errs := make([]error, len(r.kids))
	var wg sync.WaitGroup
	for k, c := range r.kids {
		if c.cmd == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.rpc.Call("Fleet.Profile", window, new(bool)); err != nil {
				errs[k] = fmt.Errorf("%s: CPU profile %q: %w", c.name, window, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Live is per agent; the agents of a lost process are not.
func (r *Remote) Live() []bool { return perAgent(r, each[[]bool](r, "Live", 0), nil) }

// FirstBeats is per agent, by the loadgen's clock (a worker's corrected
// by its offset); 0 for the agents of a lost process.
func (r *Remote) FirstBeats(since int64) []int64 {
	parts := make([][]int64, len(r.kids))
	var wg sync.WaitGroup
	for k, c := range r.kids {
		wg.Add(1)
		go func() { defer wg.Done(); parts[k] = rpcCall[[]int64](c, "FirstBeats", since+r.off[k]) }()
	}
	wg.Wait()
	return perAgent(r, parts, func(k int, v int64) int64 {
		if v == 0 {
			return 0
		}
		return v - r.off[k]
	})
}

// perAgent joins the children's per-agent answers, each padded (or cut)
// to its agents, with fix applied to each value (nil: none).
func perAgent[T any](r *Remote, parts [][]T, fix func(k int, v T) T) []T {
	var out []T
	for k, c := range r.kids {
		p := parts[k]
		for j := range c.agents {
			var v T
			if j < len(p) {
				v = p[j]
				if fix != nil {
					v = fix(k, v)
				}
			}
			out = append(out, v)
		}
	}
	return out
}

func (r *Remote) Nodes() []uint32 { return concat(each[[]uint32](r, "Nodes", 0)) }

func (r *Remote) Probe(node uint32, task uint64) string {
	for k, a := range each[ProbeAnswer](r, "Probe", ProbeArgs{Node: node, Task: task}) {
		if a.Found {
			return a.Text
		}
		r.seenMu.Lock() // not mu: the checker probes from within the merge
		was := r.seen[k][node]
		r.seenMu.Unlock()
		if was && r.kids[k].dead.Load() {
			return fmt.Sprintf("node %d ran in %s, which is lost", node, r.kids[k].name)
		}
	}
	return fmt.Sprintf("no agent runs as node %d", node)
}

// Stop stops every agent, waits until their observations are in, and
// ends the children and workers; later calls do nothing.
func (r *Remote) Stop() {
	r.stop.Do(func() {
		close(r.quit)
		var wg sync.WaitGroup
		for _, c := range r.kids {
			wg.Add(1)
			go func() { defer wg.Done(); c.stop() }()
		}
		wg.Wait()
	})
}

func concat[T any](parts [][]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Pids returns the local fleet processes' IDs, in agent order.
func (r *Remote) Pids() []int {
	out := make([]int, 0, len(r.kids))
	for _, c := range r.kids {
		if c.cmd != nil {
			out = append(out, c.cmd.Process.Pid)
		}
	}
	return out
}

// WorkerInfo is one fleet worker as the report shows it.
type WorkerInfo struct {
	ID     int
	Host   string
	Remote string
	First  int // its first agent (fleet-wide index)
	Agents int
	// CPUSeconds is the worker process's CPU time at its last reading.
	CPUSeconds float64
	// Offset is the worker's clock minus the loadgen's, within ±Bound.
	Offset, Bound time.Duration
	Lost          bool
}

// Workers describes the fleet workers, in agent order (none: nil).
func (r *Remote) Workers() []WorkerInfo {
	var out []WorkerInfo
	for _, c := range r.kids {
		if c.w == nil {
			continue
		}
		c.mu.Lock()
		cpu := c.mu.cpu
		c.mu.Unlock()
		out = append(out, WorkerInfo{ID: c.w.ID, Host: c.w.Host, Remote: c.w.Remote, First: c.lo, Agents: c.agents,
			CPUSeconds: cpu, Offset: c.w.Offset, Bound: c.w.Bound, Lost: c.dead.Load()})
	}
	return out
}

// LocalAgents is how many agents run in local child processes.
func (r *Remote) LocalAgents() int {
	n := 0
	for _, c := range r.kids {
		if c.cmd != nil {
			n += c.agents
		}
	}
	return n
}
