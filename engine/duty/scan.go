package duty

import (
	"cmp"
	"slices"

	"shoal/internal/mix"
	"shoal/sched"
	"shoal/statemachine"
)

// The scan is the driver's first pure stage: the groups' states in, the
// scheduler's node table (nodes of the cluster group, resources held by
// every assigned..running task) and the pending batches out. It reads every
// task of every group (a run is skipped when no group applied anything since
// the last scan). With a Tracker, fed by the apply fan-out, the driver keeps
// what a scan finds from one run to the next and reads only the tasks that
// changed (pending.go); this scan stays the reference its property test
// compares it with.

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
	sg     sched.Request // Service, SpecVersion, CPU, Mem, Constraints; Count set when placing
	perr   error         // constraint parse error
	tasks  []statemachine.TaskID
	msgs   []string // each task's status message (why it is still pending)
	slots  []uint32 // global: each task's node
}

// svcRef names a service across groups.
type svcRef struct {
	group int
	id    statemachine.ServiceID
}

// svcInfo is what a scan keeps of one service: its dense table key and,
// per spec version, the pending batch.
type svcInfo struct {
	key     uint32
	svc     *statemachine.Service // valid only inside the group's read
	batches map[uint32]*batch
}

// scanner walks the groups of one run: scanNodes over the cluster group,
// then scanGroup over each service group, then result.
type scanner struct {
	table   *sched.Table
	batches []*batch
	stats   RunStats // Nodes, Live, Pending, Batches
	keys    map[svcRef]*svcInfo
	// last is the previous task's service: a group's task IDs ascend in
	// creation order, and a service's tasks are created together.
	last    svcRef
	lastInf *svcInfo
	// now (unix nanoseconds) defers replacements of rejected tasks until
	// their restart delay passed (statemachine.Task.AfterReject).
	now int64
	// cons parses each spec version's constraints once (nil: at every
	// batch).
	cons *consCache
	// fails notes the failed tasks met (nil: none).
	fails *failureLog
}

func newScanner(now int64) *scanner {
	return &scanner{table: sched.NewTable(), keys: make(map[svcRef]*svcInfo), now: now}
}

// consCache keeps the parsed constraints of the spec versions the driver's
// runs met: a spec version never changes (a scale keeps the version and
// its constraints), so each is parsed once, not at every run while its
// tasks stay pending. Entries no run used since the last sweep are dropped.
type consCache struct {
	m   map[consKey]*parsedCons
	gen uint64
}

// consKey names one spec version of one service of one group: the version
// of the spec SpecAt returned, not the task's.
type consKey struct {
	group   int
	service statemachine.ServiceID
	version uint32
}

type parsedCons struct {
	cons []sched.Constraint
	err  error
	gen  uint64
}

func newConsCache() *consCache { return &consCache{m: make(map[consKey]*parsedCons)} }

// parse returns spec's constraints parsed; spec is version v of the
// service.
func (c *consCache) parse(k consKey, spec *statemachine.ServiceSpec) ([]sched.Constraint, error) {
	if c == nil {
		return sched.ParseConstraints(spec.Constraints)
	}
	p := c.m[k]
	if p == nil {
		p = &parsedCons{}
		p.cons, p.err = sched.ParseConstraints(spec.Constraints)
		c.m[k] = p
	}
	p.gen = c.gen
	return p.cons, p.err
}

// sweep drops the entries not used since the last sweep.
func (c *consCache) sweep() {
	for k, p := range c.m {
		if p.gen != c.gen {
			delete(c.m, k)
		}
	}
	c.gen++
}

// scanNodes puts the cluster group's nodes in the table.
func (sc *scanner) scanNodes(s *statemachine.State) {
	for _, id := range s.NodeIDs() {
		sc.table.UpsertNode(schedNode(s.Node(id)))
	}
	sc.stats.Nodes = sc.table.Len()
}

// scanGroup accounts a service group's live tasks in the table and collects
// its pending ones into batches.
func (sc *scanner) scanGroup(g int, s *statemachine.State) {
	sc.lastInf = nil
	for t := range s.TasksInOrder() {
		st := t.Status.State
		live := st >= statemachine.StateAssigned && st <= statemachine.StateRunning && t.Node != 0
		pending := st == statemachine.StatePending && !t.Desired.Stopping() && (!t.AfterReject() || t.StartAt() <= sc.now)
		if !live && !pending {
			if st >= statemachine.StateFailed {
				sc.fails.note(g, t, sc.now)
			}
			continue
		}
		inf := sc.service(g, s, t.Service)
		if inf == nil {
			continue
		}
		if live {
			spec, _ := inf.svc.SpecAt(t.SpecVersion) // the agent is sent the same spec
			if sc.table.AddTask(uint32(t.Node), inf.key, spec.CPU, spec.Memory) == nil {
				sc.stats.Live++
			}
			continue
		}
		b := inf.batches[t.SpecVersion]
		if b == nil {
			b = newBatch(g, inf, t.SpecVersion, sc.cons)
			if inf.batches == nil {
				inf.batches = make(map[uint32]*batch)
			}
			inf.batches[t.SpecVersion] = b
			sc.batches = append(sc.batches, b)
		}
		b.tasks = append(b.tasks, t.ID)
		b.msgs = append(b.msgs, t.Message())
		if b.global {
			b.slots = append(b.slots, t.Slot)
		}
		sc.stats.Pending++
	}
	for _, inf := range sc.keys {
		inf.svc = nil // the state is not ours outside the read
	}
}

// result orders the batches by group, service and spec version.
func (sc *scanner) result() (*sched.Table, []*batch, RunStats) {
	slices.SortFunc(sc.batches, func(a, b *batch) int { return a.compare(b.batchKey) })
	sc.stats.Batches = len(sc.batches)
	return sc.table, sc.batches, sc.stats
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
	} else if inf.svc == nil {
		inf.svc = s.Service(id)
	}
	sc.last, sc.lastInf = ref, inf
	return inf
}

func newBatch(g int, inf *svcInfo, version uint32, cons *consCache) *batch {
	spec, exact := inf.svc.SpecAt(version)
	specVersion := version
	if !exact {
		specVersion = inf.svc.SpecVersion // SpecAt returned the current spec
	}
	b := &batch{
		batchKey: batchKey{group: g, service: inf.svc.ID, version: version},
		name:     inf.svc.Spec.Name,
		global:   inf.svc.Spec.Mode == statemachine.ModeGlobal,
		sg:       sched.Request{Service: inf.key, SpecVersion: uint64(version), CPU: spec.CPU, Mem: spec.Memory},
	}
	b.sg.Constraints, b.perr = cons.parse(consKey{g, inf.svc.ID, specVersion}, spec)
	b.sg.Preferences = slices.Clone(spec.Placement.Preferences)
	b.sg.MaxPerNode = int(spec.Placement.MaxPerNode)
	b.sg.Strategy = lookup(schedStrategy[:], spec.Placement.Strategy, sched.Spread)
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
	schedStrategy = [...]sched.Strategy{
		statemachine.StrategySpread:  sched.Spread,
		statemachine.StrategyBinPack: sched.BinPack,
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

// placementSeed mixes the configured seed with the batch's identity.
func placementSeed(seed uint64, k batchKey) uint64 {
	return mix.Mix64(seed ^ uint64(k.group)<<48 ^ uint64(k.service))
}
