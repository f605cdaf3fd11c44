package duty

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"shoal/internal/clock"
	"shoal/route"
	"shoal/sched"
	"shoal/statemachine"
)

// The scheduler driver turns pending tasks into assignments: a scan of
// every group (scan.go), a plan (plan.go), and this thin loop, which
// proposes the plan's CmdAssign batch with SubmitMany and takes the
// assignments a group rejected (node gone or not ready, task no longer
// pending) back out of its table; those tasks are looked at again in a
// later run. The Raft log decides.

// DriverConfig tunes the scheduler driver. Zero values take the defaults
// named on each field.
type DriverConfig struct {
	// Interval is the time between periodic runs, on Clock: nodes that
	// became ready or freed resources get pending tasks placed within it.
	// Default 1s.
	Interval time.Duration
	// MinGap is the least time from the start of one run to the start of a
	// run triggered by Signal, so a burst of pending tasks is placed in few
	// runs. Default 20ms.
	MinGap time.Duration
	// Rest is how long the driver rests after a run, in multiples of the
	// time that run spent scanning and placing (not waiting for its
	// assignments to commit), before a run triggered by Signal (when that
	// is more than MinGap). A run scans every task; with a million of them
	// a scan takes about a tenth of a second, and runs triggered back to
	// back while tasks kept becoming pending took half of the leader's CPU
	// in a million-task ramp. With the default 1 the scans take at most
	// about half of a core, and each run places what became pending
	// meanwhile; with ten thousand tasks the scan is a millisecond and
	// MinGap decides. Negative: no rest.
	Rest float64
	// Seed is mixed into every placement's tie-break (with the group and
	// service ID), so a run can be replayed exactly. Default 0.
	Seed uint64
	// Clock times Interval and MinGap and the run statistics. Default:
	// clock.Real (manager.Start passes the engine's clock).
	Clock clock.Clock
	// Signal, if set, wakes the driver when tasks become pending; wire
	// Signal.OnApply into the engine's Config.OnApply. Default: none
	// (periodic runs only).
	Signal *Signal
	// ReasonRefresh is the least time between two changes of the reason
	// the pending tasks of one batch carry (a task that carries no reason
	// yet gets one at once). A reason that changes at every run (a count
	// of nodes that come and go) would otherwise rewrite every pending
	// task of the batch in the Raft log at every run. Default 10s;
	// negative: no limit.
	ReasonRefresh time.Duration
	// Tracker, if set, keeps the scan from one run to the next: wire its
	// OnApply and OnRecover into the engine's Config, and a run reads only
	// the tasks the groups' entries touched since the last run (plus the
	// pending ones), not every task. Default: none (every run scans every
	// task).
	Tracker *Tracker
	// FailureLimit and FailureWindow rank a node last for a service's
	// spec version once FailureLimit of its tasks ended rejected or
	// failed there within FailureWindow (failures.go): its tasks go to
	// any other node that takes them first. Defaults DefaultFailureLimit
	// and DefaultFailureWindow; a negative FailureLimit turns the
	// penalty off.
	FailureLimit  int
	FailureWindow time.Duration
	// Logf receives one line whenever a batch's reason for staying pending
	// first appears or changes (a bad constraint, no suitable node), and
	// run failures. Default: discard.
	Logf func(format string, args ...any)
}

func (c DriverConfig) withDefaults() DriverConfig {
	setDefault(&c.Interval, time.Second)
	setDefault(&c.MinGap, 20*time.Millisecond)
	setDefault(&c.Rest, 1)
	setDefault(&c.ReasonRefresh, 10*time.Second)
	setDefault(&c.FailureLimit, DefaultFailureLimit)
	setDefault(&c.FailureWindow, DefaultFailureWindow)
	defaults(&c.Clock, &c.Logf)
	return c
}

// Signal wakes a duty when an applied entry had an effect it cares about:
// the scheduler driver when tasks become pending (NewSignal), the outbox
// duty on outbox entries and block needs (NewOutboxSignal). It is safe for
// concurrent use and never blocks.
type Signal struct {
	c     chan struct{}
	kinds []statemachine.EffectKind // nil: EffPending
}

// NewSignal returns a signal for the scheduler driver, with no wake-up
// pending.
func NewSignal() *Signal { return &Signal{c: make(chan struct{}, 1)} }

// Notify wakes the driver (wake-ups coalesce).
func (s *Signal) Notify() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// OnApply has engine.Config.OnApply's signature: it notifies on any effect
// of the signal's kinds.
func (s *Signal) OnApply(_ int, _ uint64, effects []statemachine.Effect) {
	for i := range effects {
		if s.wants(effects[i].Kind) {
			s.Notify()
			return
		}
	}
}

func (s *Signal) wants(k statemachine.EffectKind) bool {
	if s.kinds == nil {
		return k == statemachine.EffPending
	}
	return slices.Contains(s.kinds, k)
}

// Unschedulable is one batch of pending tasks the last run left pending,
// and why.
type Unschedulable struct {
	Group       int
	Service     statemachine.ServiceID
	Name        string // service name
	SpecVersion uint32
	Pending     int // tasks of the batch left pending
	// Err wraps sched.ErrInvalidConstraint (the service's constraints do
	// not parse: update the service), sched.ErrNoSuitableNode or
	// sched.ErrNodeUnsuitable (no node with room passes the filters: add
	// nodes, free resources or relax constraints).
	Err error
}

// RunStats describes one run of the driver.
type RunStats struct {
	Skipped  bool // nothing changed since the last scan
	Rebuilt  bool // with a Tracker: this run scanned every task
	Nodes    int  // nodes in the table
	Live     int  // assigned..running tasks accounted in the table
	Pending  int  // pending tasks found
	Batches  int  // (group, service, spec version) batches
	Placed   int  // assignments committed
	Rejected int  // assignments the groups rejected
	Failed   int  // assignments whose outcome is unknown (timeout, ...)
	// Avoided is how many (batch, node) pairs the run ranked last because
	// the batch's tasks kept failing on the node (FailureLimit).
	Avoided int
	// Reasons is how many CmdPendingReason commands were proposed: batches
	// (or a few of their tasks) whose reason for staying pending changed.
	Reasons int
	// Durations of the stages, on the driver's clock.
	Scan, Place, Submit time.Duration
}

// Driver is the scheduler driver. RunOnce runs one pass synchronously
// (tests, scenarios and benchmarks drive it that way); Run is the leader
// duty's loop. Its methods are safe for concurrent use; runs never overlap.
type Driver struct {
	c   Cluster
	cfg DriverConfig

	// run serializes runs and owns the fields below it; LastRun and
	// Unschedulable never take it, so they never wait for a Raft round trip.
	run      sync.Mutex
	table    *sched.Table // the last run's table, corrected for rejections
	scanned  []uint64     // per group: LastIndex at the last complete scan
	problems map[batchKey]string
	// assignBuf and cmdBuf are the last run's plan and its commands,
	// reused by the next run while they are small (keepBuffer).
	assignBuf []assignment
	cmdBuf    []statemachine.Command
	// reasonAt is when each batch's reason last changed (ReasonRefresh).
	reasonAt map[batchKey]time.Time
	// inc is the kept scan (with Tracker).
	inc incremental
	// cons keeps the parsed constraints of the spec versions met.
	cons *consCache
	// fails is the recent failures per batch and node (nil: no penalty),
	// and avoided the nodes logged as ranked last, per batch, while they are.
	fails   *failureLog
	avoided map[batchKey]string

	mu struct {
		sync.Mutex
		unsched []Unschedulable
		last    RunStats
	}
}

// NewDriver returns a scheduler driver over c.
func NewDriver(c Cluster, cfg DriverConfig) *Driver {
	cfg = cfg.withDefaults()
	return &Driver{c: c, cfg: cfg, problems: make(map[batchKey]string), reasonAt: make(map[batchKey]time.Time),
		cons: newConsCache(), fails: newFailureLog(cfg.FailureLimit, cfg.FailureWindow), avoided: make(map[batchKey]string)}
}

// Run places pending tasks until ctx ends: once at once, then whenever
// Signal fires (at most once per MinGap, resting after each run as Rest
// says) and every Interval.
func (d *Driver) Run(ctx context.Context) {
	d.run.Lock()
	d.scanned = nil // a new term: scan whatever happened meanwhile
	if tr := d.cfg.Tracker; tr != nil {
		tr.start() // what happened before this term is unknown: the first run scans everything
		defer tr.stop()
	}
	d.run.Unlock()
	wakeLoop(ctx, d.cfg.Clock, d.cfg.Interval, d.gap, d.cfg.Signal, func() {
		if _, err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logf("engine: scheduler driver: %v", err)
		}
	})
}

// gap is the least time from the start of one run to the start of a run
// triggered by Signal, after a run that took ran (the last run's scan and
// place times set the rest).
func (d *Driver) gap(ran time.Duration) time.Duration {
	st := d.LastRun()
	return d.gapAfter(ran, st.Scan+st.Place)
}

// gapAfter is gap after a run that took ran, work of it scanning and
// placing.
func (d *Driver) gapAfter(ran, work time.Duration) time.Duration {
	return max(d.cfg.MinGap, ran+time.Duration(max(d.cfg.Rest, 0)*float64(work)))
}

// RunOnce places every pending task it can and returns once the
// assignments are committed (applied on this replica): how many were, and
// the first error that stopped the run or left an outcome unknown. Tasks
// it cannot place stay pending (see Unschedulable).
func (d *Driver) RunOnce(ctx context.Context) (placed int, err error) {
	d.run.Lock()
	defer d.run.Unlock()
	start := d.cfg.Clock.Now()
	indexes, changed, err := d.indexes()
	if err != nil || !changed {
		if err == nil {
			d.publish(RunStats{Skipped: true}, nil, false)
		}
		return 0, err
	}
	scan := d.scan
	if d.cfg.Tracker != nil {
		scan = d.scanIncremental
	}
	table, batches, stats, err := scan(indexes)
	if err != nil {
		return 0, err
	}
	d.table = table
	d.cons.sweep()
	stats.Avoided = d.avoid(batches, start.UnixNano())
	stats.Scan = d.cfg.Clock.Now().Sub(start)

	start = d.cfg.Clock.Now()
	p := makePlan(table, batches, d.cfg.Seed, d.assignBuf)
	d.assignBuf = keepBuffer(p.assigns)
	un := p.unschedulable(batches)
	d.logReasons(un, batches)
	stats.Place = d.cfg.Clock.Now().Sub(start)

	reasons, held := p.reasonCommands(batches, d.mayRefresh(batches, start))
	start = d.cfg.Clock.Now()
	first := d.submit(ctx, &p, &stats)
	if err := d.submitReasons(ctx, reasons, &stats); first == nil {
		first = err
	}
	stats.Submit = d.cfg.Clock.Now().Sub(start)
	if first == nil && !held {
		d.scanned = indexes
	} else {
		d.scanned = nil // outcomes unknown, or a reason is held back: scan again next time
	}
	d.publish(stats, un, true)
	return stats.Placed, first
}

// indexes reads every group's last applied index and reports whether any
// moved since the last complete scan.
func (d *Driver) indexes() ([]uint64, bool, error) {
	groups := d.c.Groups()
	idx := make([]uint64, groups+1)
	for g := 0; g <= groups; g++ {
		if err := d.c.ReadLocal(g, func(s *statemachine.State) { idx[g] = s.LastIndex() }); err != nil {
			return nil, false, err
		}
	}
	return idx, !slices.Equal(idx, d.scanned), nil
}

// scan reads every group into a fresh table and the pending batches,
// recording the index each group was read at.
func (d *Driver) scan(indexes []uint64) (*sched.Table, []*batch, RunStats, error) {
	sc := newScanner(d.cfg.Clock.Now().UnixNano())
	sc.cons, sc.fails = d.cons, d.fails
	err := d.c.ReadLocal(route.ClusterGroup, func(s *statemachine.State) {
		indexes[route.ClusterGroup] = s.LastIndex()
		sc.scanNodes(s)
	})
	if err != nil {
		return nil, nil, RunStats{}, err
	}
	for g := 1; g < len(indexes); g++ {
		err := d.c.ReadLocal(g, func(s *statemachine.State) {
			indexes[g] = s.LastIndex()
			sc.scanGroup(g, s)
		})
		if err != nil {
			return nil, nil, RunStats{}, err
		}
	}
	t, b, st := sc.result()
	return t, b, st, nil
}

// scanIncremental brings the kept scan up to date with what the tracker
// collected (or scans everything when it cannot) and returns its table and
// pending batches, as scan would.
func (d *Driver) scanIncremental([]uint64) (*sched.Table, []*batch, RunStats, error) {
	in := &d.inc
	in.fails, in.now = d.fails, d.cfg.Clock.Now().UnixNano()
	touched, stale := d.cfg.Tracker.take()
	ok := false
	var err error
	if !stale && in.valid {
		ok, err = in.refresh(d.c, touched)
	}
	rebuilt := false
	if err == nil && !ok {
		err, rebuilt = in.rebuild(d.c), true
	}
	if err != nil {
		in.valid = false
		return nil, nil, RunStats{}, err
	}
	batches, stats, err := in.batches(d.c, d.cfg.Clock.Now().UnixNano(), d.cons)
	if err != nil {
		in.valid = false
		return nil, nil, RunStats{}, err
	}
	stats.Rebuilt = rebuilt
	return in.table, batches, stats, nil
}

// avoid names, in each replicated batch's request, the nodes where its
// tasks kept failing (Request.Avoid), logs the batches whose list is new
// or changed, and returns how many (batch, node) pairs it named. A global
// task has one possible node: nothing to rank.
func (d *Driver) avoid(batches []*batch, now int64) int {
	if d.fails == nil {
		return 0
	}
	d.fails.sweep(now)
	n := 0
	for _, b := range batches {
		if b.global {
			continue
		}
		b.sg.Avoid = d.fails.avoid(b.batchKey, now, nil)
		if len(b.sg.Avoid) == 0 {
			delete(d.avoided, b.batchKey)
			continue
		}
		n += len(b.sg.Avoid)
		if msg := fmt.Sprint(b.sg.Avoid); d.avoided[b.batchKey] != msg {
			d.avoided[b.batchKey] = msg
			d.cfg.Logf("engine: scheduler: service %q (group %d, spec version %d): its tasks failed or were rejected %d times within %s on node(s) %s; its tasks go to other nodes first",
				b.name, b.group, b.version, d.cfg.FailureLimit, d.cfg.FailureWindow, msg)
		}
	}
	// A batch absent from this run (its task held for its restart delay)
	// keeps its line while its nodes are still ranked last, so the line is
	// not repeated at every failure on a node with no other to take it.
	for k := range d.avoided {
		if len(d.fails.avoid(k, now, nil)) == 0 {
			delete(d.avoided, k)
		}
	}
	return n
}

// logReasons logs the reasons for staying pending that are new or changed
// since the last run.
func (d *Driver) logReasons(un []Unschedulable, batches []*batch) {
	total := make(map[batchKey]int, len(un))
	for _, b := range batches {
		total[b.batchKey] = len(b.tasks)
	}
	problems := make(map[batchKey]string, len(un))
	for _, u := range un {
		k := batchKey{group: u.Group, service: u.Service, version: u.SpecVersion}
		msg := reasonOf(u.Err)
		problems[k] = msg
		if d.problems[k] != msg {
			d.cfg.Logf("engine: scheduler: service %q (group %d, spec version %d): %d of %d tasks stay pending: %s",
				u.Name, u.Group, u.SpecVersion, u.Pending, total[k], msg)
		}
	}
	d.problems = problems
}

// submit proposes the plan's assignments, without any lock readers take,
// and takes the rejected ones back out of the table.
func (d *Driver) submit(ctx context.Context, p *plan, stats *RunStats) error {
	if len(p.assigns) == 0 {
		return nil
	}
	var outs []route.Outcome
	if a, ok := d.c.(assigner); ok {
		// No command per task: the cluster encodes each assignment as it
		// reads it.
		outs = a.SubmitAssigns(ctx, len(p.assigns), func(i int) (statemachine.TaskID, statemachine.NodeID) {
			return p.assigns[i].task, statemachine.NodeID(p.assigns[i].node)
		})
	} else {
		cmds := p.commands(d.cmdBuf)
		outs = d.c.SubmitMany(ctx, cmds)
		clear(cmds) // keep no references
		d.cmdBuf = keepBuffer(cmds)
	}
	var first error
	for i, o := range outs {
		switch {
		case o.Failed != nil:
			stats.Failed++
			d.inc.valid = false // the task's record cannot say
			if first == nil {
				first = fmt.Errorf("engine: scheduler: assign task %d to node %d: %w", p.assigns[i].task, p.assigns[i].node, o.Failed)
			}
		case o.Result.Code != statemachine.CodeOK:
			stats.Rejected++
			a := p.assigns[i]
			_ = d.table.RemoveTask(a.node, a.service, a.cpu, a.mem)
		default:
			stats.Placed++
			if d.cfg.Tracker != nil {
				d.inc.placed(p.assigns[i])
			}
		}
	}
	return first
}

// keepBuffer returns buf emptied for the next run, or nil if it holds
// more than 4,096 elements: a ramp's plan of a million assignments is not
// kept for the next run (its commands held a hundred MB on the leader for
// good; 4,096 commands are under a MB).
func keepBuffer[T any](buf []T) []T {
	if cap(buf) > 1<<12 {
		return nil
	}
	return buf[:0]
}

// mayRefresh returns which batches may have their reason changed now
// (ReasonRefresh), noting the change for those that will; batches no
// longer pending are forgotten.
func (d *Driver) mayRefresh(batches []*batch, now time.Time) func(batchKey) bool {
	live := make(map[batchKey]bool, len(batches))
	for _, b := range batches {
		live[b.batchKey] = true
	}
	for k := range d.reasonAt {
		if !live[k] {
			delete(d.reasonAt, k)
		}
	}
	return func(k batchKey) bool {
		if at, ok := d.reasonAt[k]; ok && d.cfg.ReasonRefresh > 0 && now.Sub(at) < d.cfg.ReasonRefresh {
			return false
		}
		d.reasonAt[k] = now
		return true
	}
}

// submitReasons proposes the pending reasons that changed, after the
// assignments (a task assigned meanwhile is past its reason and keeps no
// message). A rejection means the service went away: nothing to explain.
func (d *Driver) submitReasons(ctx context.Context, cmds []statemachine.Command, stats *RunStats) error {
	if len(cmds) == 0 {
		return nil
	}
	stats.Reasons = len(cmds)
	for i, o := range d.c.SubmitMany(ctx, cmds) {
		if o.Failed != nil {
			return fmt.Errorf("engine: scheduler: say why service %q stays pending: %w", cmds[i].Name, o.Failed)
		}
	}
	return nil
}

// publish makes a run's results visible to LastRun and Unschedulable
// (Unschedulable only changes after a run that scanned).
func (d *Driver) publish(stats RunStats, un []Unschedulable, scanned bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.last = stats
	if scanned {
		d.mu.unsched = un
	}
}

// LastRun returns the statistics of the last run.
func (d *Driver) LastRun() RunStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.last
}

// Unschedulable returns the batches the last run that scanned left pending,
// ordered by group, service and spec version.
func (d *Driver) Unschedulable() []Unschedulable {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.mu.unsched)
}
