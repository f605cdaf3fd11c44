package fleet

import (
	"fmt"
	"io"
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
// most; its methods are Fleet's, with fleet-wide agent indexes. What the
// agents observe reaches the observer once, in the order it happened
// across the processes (merged by stamp): an address one agent released
// and another then took is seen released first.
type Remote struct {
	kids []*child
	per  int
	obs  Observer
	mu   sync.Mutex // over the merge
	q    [][]obs    // per child, observations not yet handed on
	upto []int64    // per child, its latest promise (obsBatch.Upto)
	stop sync.Once
}

// StartRemote starts cfg.Agents agents in child processes of binary, per
// agents at most each (0: AgentsPerProcess); cfg's First and Agents are
// split among them. What they observe goes to obs (nil: nothing). The
// children's own messages go to stderr.
func StartRemote(binary string, cfg ChildConfig, per int, o Observer, stderr io.Writer) (*Remote, error) {
	if per <= 0 {
		per = AgentsPerProcess
	}
	n := max(1, (cfg.Agents+per-1)/per)
	r := &Remote{per: per, obs: o, q: make([][]obs, n), upto: make([]int64, n)}
	for k := range n {
		cc := cfg
		cc.First = cfg.First + k*per
		cc.Agents = min(per, cfg.Agents-k*per)
		if cfg.CPUProfile != "" {
			cc.CPUProfile = fmt.Sprintf(cfg.CPUProfile, k+1)
		}
		c, err := startChild(binary, cc, func(b obsBatch) { r.merge(k, b) }, stderr)
		if err != nil {
			for _, c := range r.kids {
				c.kill()
			}
			return nil, err
		}
		r.kids = append(r.kids, c)
	}
	return r, nil
}

// merge takes child k's batch and hands on, in stamp order, every queued
// observation no child can still precede: those stamped at or before the
// lowest promise.
func (r *Remote) merge(k int, b obsBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q[k] = append(r.q[k], b.Obs...)
	r.upto[k] = b.Upto
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
		r.deliver(o)
	}
}

func (r *Remote) deliver(o obs) {
	if r.obs == nil {
		return
	}
	at := time.Unix(0, o.At)
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
func (r *Remote) at(i int) (*child, int) { return r.kids[i/r.per], i % r.per }

func (r *Remote) Partition(i int, d time.Duration) {
	c, j := r.at(i)
	rpcCall[bool](c, "Partition", PartitionArgs{I: j, D: d})
}
func (r *Remote) Vanish(i int) bool { c, j := r.at(i); return rpcCall[bool](c, "Vanish", j) }
func (r *Remote) Return(i int)      { c, j := r.at(i); rpcCall[bool](c, "Return", j) }
func (r *Remote) Gone(i int) bool   { c, j := r.at(i); return rpcCall[bool](c, "Gone", j) }
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

func (r *Remote) Live() []bool        { return concat(each[[]bool](r, "Live", 0)) }
func (r *Remote) Heartbeats() []int64 { return concat(each[[]int64](r, "Heartbeats", 0)) }
func (r *Remote) Nodes() []uint32     { return concat(each[[]uint32](r, "Nodes", 0)) }

func (r *Remote) Probe(node uint32, task uint64) string {
	for _, a := range each[ProbeAnswer](r, "Probe", ProbeArgs{Node: node, Task: task}) {
		if a.Found {
			return a.Text
		}
	}
	return fmt.Sprintf("no agent runs as node %d", node)
}

// Stop stops every agent, waits until their observations are in, and
// ends the children; later calls do nothing.
func (r *Remote) Stop() {
	r.stop.Do(func() {
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

// Pids returns the fleet processes' IDs, in agent order.
func (r *Remote) Pids() []int {
	out := make([]int, 0, len(r.kids))
	for _, c := range r.kids {
		out = append(out, c.cmd.Process.Pid)
	}
	return out
}
