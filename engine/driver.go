package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"shoal/internal/mix"
	"shoal/sched"
	"shoal/statemachine"
)

// The scheduler driver is the leader-only duty that turns pending tasks
// into assignments: it reads every group's state, builds a sched.Table of
// the cluster group's nodes and the resources held by assigned..running
// tasks, places the pending tasks in batches of one (group, service, spec
// version) with sched.Place (global services' tasks, bound to their node,
// are checked with CheckNode), and proposes CmdAssign batches with
// SubmitMany. The Raft log decides: an assignment the group rejects (node
// gone or not ready, task no longer pending) is taken back out of the table
// and the task is looked at again in a later run.
//
// Each run rebuilds the table from a full scan of this replica's state (the
// tasks' resources have no change feed yet), so a run costs O(tasks); a run
// is skipped when no group applied anything since the last scan.

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
	// Seed is mixed into every placement's tie-break (with the group and
	// service ID), so a run can be replayed exactly. Default 0.
	Seed uint64
	// Clock times Interval and MinGap and the run statistics. Default: the
	// engine's clock.
	Clock Clock
	// Signal, if set, wakes the driver when tasks become pending; wire
	// Signal.OnApply into the engine's Config.OnApply. Default: none
	// (periodic runs only).
	Signal *Signal
	// Logf receives one line whenever a batch's reason for staying pending
	// first appears or changes (a bad constraint, no suitable node), and
	// run failures. Default: discard.
	Logf func(format string, args ...any)
}

// dutyDefaults gives a leader duty the engine's clock and a silent log
// where its config names none.
func dutyDefaults(e *Engine, clock *Clock, logf *func(string, ...any)) {
	if *clock == nil {
		*clock = e.cfg.Clock
	}
	if *logf == nil {
		*logf = func(string, ...any) {}
	}
}

func (c DriverConfig) withDefaults(e *Engine) DriverConfig {
	setDefault(&c.Interval, time.Second)
	setDefault(&c.MinGap, 20*time.Millisecond)
	dutyDefaults(e, &c.Clock, &c.Logf)
	return c
}

// Signal wakes the scheduler driver when tasks become pending. It is safe
// for concurrent use and never blocks.
type Signal struct{ c chan struct{} }

// NewSignal returns a signal with no wake-up pending.
func NewSignal() *Signal { return &Signal{c: make(chan struct{}, 1)} }

// Notify wakes the driver (wake-ups coalesce).
func (s *Signal) Notify() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// OnApply has Config.OnApply's signature: it notifies on any
// statemachine.EffPending effect.
func (s *Signal) OnApply(_ int, _ uint64, effects []statemachine.Effect) {
	for i := range effects {
		if effects[i].Kind == statemachine.EffPending {
			s.Notify()
			return
		}
	}
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
	Nodes    int  // nodes in the table
	Live     int  // assigned..running tasks accounted in the table
	Pending  int  // pending tasks found
	Batches  int  // (group, service, spec version) batches
	Placed   int  // assignments committed
	Rejected int  // assignments the groups rejected
	Failed   int  // assignments whose outcome is unknown (timeout, ...)
	// Durations of the stages, on the driver's clock.
	Scan, Place, Submit time.Duration
}

// Driver is the scheduler driver. It implements Duty; RunOnce runs one
// pass synchronously (tests and benchmarks drive it that way). Its methods
// are safe for concurrent use; runs never overlap.
type Driver struct {
	e   *Engine
	cfg DriverConfig

	mu struct {
		sync.Mutex
		table     *sched.Table // the last run's table, corrected for rejections
		scanned   []uint64     // per group: LastIndex at the last complete scan
		problems  map[batchKey]string
		unsched   []Unschedulable
		last      RunStats
		assignBuf []statemachine.Command
	}
}

var _ Duty = (*Driver)(nil)

// NewDriver returns a driver for e; register it with e.AddDuty.
func NewDriver(e *Engine, cfg DriverConfig) *Driver {
	d := &Driver{e: e, cfg: cfg.withDefaults(e)}
	d.mu.problems = make(map[batchKey]string)
	return d
}

// Run places pending tasks until ctx ends: once at once, then whenever
// Signal fires (at most once per MinGap) and every Interval.
func (d *Driver) Run(ctx context.Context) {
	d.mu.Lock()
	d.mu.scanned = nil // a new term: scan whatever happened meanwhile
	d.mu.Unlock()
	var wake <-chan struct{}
	if d.cfg.Signal != nil {
		wake = d.cfg.Signal.c
	}
	for {
		start := d.cfg.Clock.Now()
		if _, err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logf("engine: scheduler driver: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.cfg.Clock.After(d.cfg.Interval):
		case <-wake:
			if gap := d.cfg.MinGap - d.cfg.Clock.Now().Sub(start); gap > 0 {
				select {
				case <-ctx.Done():
					return
				case <-d.cfg.Clock.After(gap):
				}
			}
		}
	}
}

// RunOnce places every pending task it can and returns once the
// assignments are committed (applied on this replica): how many were, and
// the first error that stopped the run or left an outcome unknown. Tasks
// it cannot place stay pending (see Unschedulable).
func (d *Driver) RunOnce(ctx context.Context) (placed int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.scanLocked()
	if err != nil || p == nil {
		return 0, err
	}
	d.placeLocked(p)
	return d.submitLocked(ctx, p)
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

// batchKey names a batch: one spec version of one service of one group.
type batchKey struct {
	group   int
	service statemachine.ServiceID
	version uint32
}

func (k batchKey) compare(o batchKey) int {
	switch {
	case k.group != o.group:
		return k.group - o.group
	case k.service != o.service:
		return cmp.Compare(k.service, o.service)
	}
	return cmp.Compare(k.version, o.version)
}

// batch is the pending tasks of one batchKey, with what placement needs,
// copied out of the state.
type batch struct {
	batchKey
	name   string
	global bool
	sg     sched.Group // Service, SpecVersion, CPU, Mem, Constraints; Count set when placing
	perr   error       // constraint parse error
	tasks  []statemachine.TaskID
	slots  []uint32 // global: each task's node
	placed int      // tasks given a node in this run's plan
}

// assignment is one proposed CmdAssign and what it reserved in the table.
type assignment struct {
	node, service uint32
	cpu, mem      int64
}

// plan is one run's work.
type plan struct {
	stats   RunStats
	indexes []uint64 // per group: LastIndex at the scan
	batches []*batch
	cmds    []statemachine.Command
	assigns []assignment // parallel to cmds
	start   time.Time
}

// scanLocked reads every group into a fresh table and the pending batches.
// It returns a nil plan when nothing was applied since the last scan.
func (d *Driver) scanLocked() (*plan, error) {
	groups := d.e.Groups()
	p := &plan{indexes: make([]uint64, groups+1), start: d.cfg.Clock.Now()}
	for g := 0; g <= groups; g++ {
		if err := d.e.ReadLocal(g, func(s *statemachine.State) { p.indexes[g] = s.LastIndex() }); err != nil {
			return nil, err
		}
	}
	if slices.Equal(p.indexes, d.mu.scanned) {
		d.mu.last = RunStats{Skipped: true}
		return nil, nil
	}
	table := sched.NewTable()
	err := d.e.ReadLocal(ClusterGroup, func(s *statemachine.State) {
		p.indexes[ClusterGroup] = s.LastIndex()
		for _, id := range s.NodeIDs() {
			table.UpsertNode(schedNode(s.Node(id)))
		}
	})
	if err != nil {
		return nil, err
	}
	p.stats.Nodes = table.Len()
	sc := scanner{table: table, p: p, keys: make(map[svcRef]*svcInfo)}
	for g := 1; g <= groups; g++ {
		err := d.e.ReadLocal(g, func(s *statemachine.State) {
			p.indexes[g] = s.LastIndex()
			sc.scanGroup(g, s)
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(p.batches, func(a, b *batch) int { return a.compare(b.batchKey) })
	p.stats.Batches = len(p.batches)
	p.stats.Scan = d.cfg.Clock.Now().Sub(p.start)
	d.mu.table = table
	return p, nil
}

// svcRef names a service across groups.
type svcRef struct {
	group int
	id    statemachine.ServiceID
}

// svcInfo is what a scan keeps of one service: its dense table key and,
// per spec version, the reservation and the pending batch.
type svcInfo struct {
	key     uint32
	svc     *statemachine.Service // valid only inside the group's read
	batches map[uint32]*batch
}

// scanner walks the groups of one run.
type scanner struct {
	table *sched.Table
	p     *plan
	keys  map[svcRef]*svcInfo
	// last is the previous task's service: a group's task IDs ascend in
	// creation order, and a service's tasks are created together.
	last    svcRef
	lastInf *svcInfo
}

func (sc *scanner) service(g int, s *statemachine.State, id statemachine.ServiceID) *svcInfo {
	ref := svcRef{g, id}
	if sc.lastInf != nil && sc.last == ref {
		return sc.lastInf
	}
	inf := sc.keys[ref]
	if inf == nil {
		svc := s.Service(id)
		if svc == nil {
			return nil
		}
		inf = &svcInfo{key: uint32(len(sc.keys) + 1), svc: svc}
		sc.keys[ref] = inf
	}
	sc.last, sc.lastInf = ref, inf
	return inf
}

// specOf returns the spec a task of version v was created from: the
// current one, or the one before the last update (older versions are
// approximated by the current spec).
func specOf(svc *statemachine.Service, v uint32) *statemachine.ServiceSpec {
	if svc.PrevSpec != nil && v+1 == svc.SpecVersion {
		return svc.PrevSpec
	}
	return &svc.Spec
}

func (sc *scanner) scanGroup(g int, s *statemachine.State) {
	sc.lastInf = nil
	for _, id := range s.TaskIDs() {
		t := s.Task(id)
		st := t.Status.State
		live := st >= statemachine.StateAssigned && st <= statemachine.StateRunning && t.Node != 0
		pending := st == statemachine.StatePending && !t.Desired.Stopping()
		if !live && !pending {
			continue
		}
		inf := sc.service(g, s, t.Service)
		if inf == nil {
			continue
		}
		if live {
			spec := specOf(inf.svc, t.SpecVersion)
			if sc.table.AddTask(uint32(t.Node), inf.key, spec.CPU, spec.Memory) == nil {
				sc.p.stats.Live++
			}
			continue
		}
		b := inf.batches[t.SpecVersion]
		if b == nil {
			b = newBatch(g, inf, t.SpecVersion)
			if inf.batches == nil {
				inf.batches = make(map[uint32]*batch)
			}
			inf.batches[t.SpecVersion] = b
			sc.p.batches = append(sc.p.batches, b)
		}
		b.tasks = append(b.tasks, id)
		if b.global {
			b.slots = append(b.slots, t.Slot)
		}
		sc.p.stats.Pending++
	}
	for _, inf := range sc.keys {
		inf.svc = nil // the state is not ours outside the read
	}
}

func newBatch(g int, inf *svcInfo, version uint32) *batch {
	spec := specOf(inf.svc, version)
	b := &batch{
		batchKey: batchKey{group: g, service: inf.svc.ID, version: version},
		name:     inf.svc.Spec.Name,
		global:   inf.svc.Spec.Mode == statemachine.ModeGlobal,
		sg:       sched.Group{Service: inf.key, SpecVersion: uint64(version), CPU: spec.CPU, Mem: spec.Memory},
	}
	b.sg.Constraints, b.perr = sched.ParseConstraints(spec.Constraints)
	return b
}

// The scheduler keeps its own node enums (zero values that suit its
// columnar table); these tables are the one place the state's are mapped
// to them. A value outside a table is treated as down / worker / active.
var (
	schedStatus = [...]sched.NodeStatus{
		statemachine.NodeReady:        sched.StatusReady,
		statemachine.NodeDisconnected: sched.StatusDisconnected,
		statemachine.NodeInitializing: sched.StatusInitializing,
		statemachine.NodeDown:         sched.StatusDown,
	}
	schedAvailability = [...]sched.Availability{
		statemachine.AvailActive: sched.AvailabilityActive,
		statemachine.AvailPause:  sched.AvailabilityPause,
		statemachine.AvailDrain:  sched.AvailabilityDrain,
	}
	schedRole = [...]sched.Role{
		statemachine.RoleWorker:  sched.RoleWorker,
		statemachine.RoleManager: sched.RoleManager,
	}
)

// lookup returns table[i], or def when i is outside the table.
func lookup[I ~uint8, V any](table []V, i I, def V) V {
	if int(i) < len(table) {
		return table[i]
	}
	return def
}

func schedNode(n *statemachine.Node) sched.Node {
	return sched.Node{ID: uint32(n.ID), Hostname: n.Name,
		Role:         lookup(schedRole[:], n.Role, sched.RoleWorker),
		Status:       lookup(schedStatus[:], n.Status, sched.StatusDown),
		Availability: lookup(schedAvailability[:], n.Availability, sched.AvailabilityActive),
		CPU:          n.CPU, Mem: n.Memory, Labels: n.Labels}
}

// placeLocked places every batch on the table, global services first (their
// tasks have one possible node each), and records why batches stay pending.
func (d *Driver) placeLocked(p *plan) {
	start := d.cfg.Clock.Now()
	t := d.mu.table
	cmds := d.mu.assignBuf[:0]
	why := make(map[batchKey]error)
	add := func(b *batch, task statemachine.TaskID, node uint32) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdAssign, Task: task, Node: statemachine.NodeID(node)})
		p.assigns = append(p.assigns, assignment{node: node, service: b.sg.Service, cpu: b.sg.CPU, mem: b.sg.Mem})
		b.placed++
	}
	for _, global := range []bool{true, false} {
		for _, b := range p.batches {
			if b.global != global {
				continue
			}
			if b.perr != nil {
				why[b.batchKey] = b.perr
				continue
			}
			if global {
				d.placeGlobal(t, b, why, add)
				continue
			}
			g := b.sg
			g.Count = len(b.tasks)
			pl, err := t.Place(g, placementSeed(d.cfg.Seed, b.batchKey))
			if err != nil {
				why[b.batchKey] = err
			}
			i := 0
			for j, node := range pl.Nodes {
				for range pl.Counts[j] {
					add(b, b.tasks[i], node)
					i++
				}
			}
		}
	}
	p.cmds = cmds
	d.mu.assignBuf = cmds
	d.recordLocked(p, why)
	p.stats.Place = d.cfg.Clock.Now().Sub(start)
}

// placeGlobal checks each task of a global batch on its own node.
func (d *Driver) placeGlobal(t *sched.Table, b *batch, why map[batchKey]error, add func(*batch, statemachine.TaskID, uint32)) {
	g := b.sg
	g.Count = 1
	for i, task := range b.tasks {
		node := b.slots[i]
		if err := t.CheckNode(g, node); err != nil {
			if why[b.batchKey] == nil {
				why[b.batchKey] = err
			}
			continue
		}
		if t.AddTask(node, g.Service, g.CPU, g.Mem) == nil {
			add(b, task, node)
		}
	}
}

// placementSeed mixes the configured seed with the batch's identity.
func placementSeed(seed uint64, k batchKey) uint64 {
	return mix.Mix64(seed ^ uint64(k.group)<<48 ^ uint64(k.service))
}

// recordLocked keeps the batches left pending and logs the reasons that
// are new or changed since the last run.
func (d *Driver) recordLocked(p *plan, why map[batchKey]error) {
	problems := make(map[batchKey]string, len(why))
	d.mu.unsched = d.mu.unsched[:0]
	for _, b := range p.batches {
		err := why[b.batchKey]
		if err == nil {
			continue
		}
		left := len(b.tasks) - b.placed
		msg := reasonOf(err)
		problems[b.batchKey] = msg
		d.mu.unsched = append(d.mu.unsched, Unschedulable{Group: b.batchKey.group, Service: b.service,
			Name: b.name, SpecVersion: b.version, Pending: left, Err: err})
		if d.mu.problems[b.batchKey] != msg {
			d.cfg.Logf("engine: scheduler: service %q (group %d, spec version %d): %d of %d tasks stay pending: %s",
				b.name, b.batchKey.group, b.version, left, len(b.tasks), msg)
		}
	}
	d.mu.problems = problems
}

// reasonOf is the part of a placement error that says why, without the
// counts that change from run to run (so a reason is logged once).
func reasonOf(err error) string {
	var ue *sched.UnplacedError
	if errors.As(err, &ue) {
		return sched.ErrNoSuitableNode.Error() + ": " + ue.Why.String()
	}
	var ne *sched.NodeError
	if errors.As(err, &ne) {
		return sched.ErrNodeUnsuitable.Error() + ": " + ne.Reason.String()
	}
	return err.Error()
}

// submitLocked proposes the plan's assignments and takes the rejected ones
// back out of the table.
func (d *Driver) submitLocked(ctx context.Context, p *plan) (int, error) {
	start := d.cfg.Clock.Now()
	var first error
	if len(p.cmds) > 0 {
		for i, o := range d.e.SubmitMany(ctx, p.cmds) {
			switch {
			case o.Failed != nil:
				p.stats.Failed++
				if first == nil {
					first = fmt.Errorf("engine: scheduler: assign task %d to node %d: %w", p.cmds[i].Task, p.cmds[i].Node, o.Failed)
				}
			case o.Result.Code != statemachine.CodeOK:
				p.stats.Rejected++
				a := p.assigns[i]
				_ = d.mu.table.RemoveTask(a.node, a.service, a.cpu, a.mem)
			default:
				p.stats.Placed++
			}
		}
	}
	clear(p.cmds) // the buffer is reused; keep no references
	p.stats.Submit = d.cfg.Clock.Now().Sub(start)
	if first == nil {
		d.mu.scanned = p.indexes
	} else {
		d.mu.scanned = nil // outcomes unknown: scan again next time
	}
	d.mu.last = p.stats
	return p.stats.Placed, first
}
