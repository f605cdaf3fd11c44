package duty

import (
	"slices"
	"sync"

	"shoal/route"
	"shoal/sched"
	"shoal/statemachine"
)

// The incremental scan: what the full scan (scan.go) finds at every run —
// the node table with every live task's reservation, and the pending
// tasks — kept from one run to the next and corrected by the tasks the
// groups' applied entries touched since, so that a run costs what changed,
// not what exists. Changes reach it through a Tracker fed from the
// replica's apply fan-out (engine.Config.OnApply, OnRecover); whenever it
// cannot know what changed (the replica became leader, a group restored a
// snapshot, an outcome is unknown, a node came or went, a service's spec
// version moved under live tasks) it is rebuilt by a full scan.

// maxDirty is how many touched tasks a group may collect between two
// runs: past it a full scan is cheaper than looking each one up.
const maxDirty = 1 << 21

// Tracker collects, from the apply fan-out, the tasks and services each
// group's entries touched, for the scheduler driver's incremental scan
// (DriverConfig.Tracker). It collects only while the driver runs as the
// leader's duty, so a follower keeps nothing. Its methods are safe for
// concurrent use and never block for long.
type Tracker struct {
	mu     sync.Mutex
	active bool
	stale  bool // something was missed: the next run scans everything
	groups []touched
}

// touched is what one group's entries touched since the last take.
type touched struct {
	tasks    []statemachine.TaskID
	services []statemachine.ServiceID
	nodes    []statemachine.NodeID // nodes the cluster group changed
}

// NewTracker returns a tracker that collects nothing until a driver runs.
func NewTracker() *Tracker { return &Tracker{} }

// OnApply has engine.Config.OnApply's signature.
func (t *Tracker) OnApply(group int, _ uint64, effects []statemachine.Effect) {
	if len(effects) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active || t.stale {
		return
	}
	for len(t.groups) <= group {
		t.groups = append(t.groups, touched{})
	}
	g := &t.groups[group]
	for _, e := range effects {
		switch {
		case e.Kind == statemachine.EffNodeChanged:
			g.nodes = append(g.nodes, e.Node)
		case e.Kind == statemachine.EffServiceChanged:
			g.services = append(g.services, e.Service)
		case e.Task != 0:
			// An entry's effects on one task come together (its state,
			// then its assignment): one look at it is enough.
			if n := len(g.tasks); n == 0 || g.tasks[n-1] != e.Task {
				g.tasks = append(g.tasks, e.Task)
			}
		}
	}
	if len(g.tasks) > maxDirty {
		t.stale = true
		t.groups = nil
	}
}

// OnRecover has engine.Config.OnRecover's signature: a group's state was
// replaced by a snapshot, so what changed in it is unknown.
func (t *Tracker) OnRecover(int, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stale, t.groups = true, nil
}

// start begins collecting (the driver leads): what happened before is
// unknown, so the first take says stale.
func (t *Tracker) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active, t.stale, t.groups = true, true, nil
}

// stop ends collecting (the driver no longer leads).
func (t *Tracker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active, t.stale, t.groups = false, true, nil
}

// take returns what was touched since the last take, per group, and
// whether something was missed (always, when it was not collecting: a
// driver run directly, without Run, starts it here).
func (t *Tracker) take() ([]touched, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		t.active, t.stale, t.groups = true, false, nil
		return nil, true
	}
	g, stale := t.groups, t.stale
	t.groups, t.stale = nil, false
	return g, stale
}

// record is what one tracked task contributes to a run: a live task's
// reservation in the table (res > 0: its CPU and memory are
// incremental.res[res]), or a pending task's place in a batch (res 0).
// key 0: no record. Twelve bytes, in chunks of consecutive task IDs: a
// map entry per task cost the leader about 130 bytes per task.
type record struct {
	node, key, res uint32
}

func (r record) live() bool { return r.res != 0 }

// recChunkBits: a chunk holds the records of 1,024 consecutive task IDs
// (a group's IDs ascend as its tasks are created).
const recChunkBits = 10

type recChunk struct {
	n int // records held
	r [1 << recChunkBits]record
}

// resources are a live task's reservation.
type resources struct{ cpu, mem int64 }

// groupRecords are one service group's tracked tasks.
type groupRecords struct {
	chunks map[uint64]*recChunk // by task ID >> recChunkBits
	// pending lists the tasks whose record says pending, and maybe some
	// that no longer are (a placed or removed task stays until the next
	// run's compact): a task is appended as its record becomes pending,
	// never looked up or deleted. sorted says whether it ascends strictly
	// (no duplicates): a group's new tasks come in ID order.
	pending []statemachine.TaskID
	sorted  bool
	// version is each service's spec version when it was last looked at:
	// a task two versions behind reserves the current spec (SpecAt), so
	// a move of the version changes reservations no task effect names.
	version map[statemachine.ServiceID]uint32
}

func (gr *groupRecords) get(id statemachine.TaskID) (record, bool) {
	c := gr.chunks[uint64(id)>>recChunkBits]
	if c == nil {
		return record{}, false
	}
	r := c.r[uint64(id)&(1<<recChunkBits-1)]
	return r, r.key != 0
}

func (gr *groupRecords) set(id statemachine.TaskID, r record) {
	k := uint64(id) >> recChunkBits
	c := gr.chunks[k]
	if c == nil {
		c = new(recChunk)
		gr.chunks[k] = c
	}
	slot := &c.r[uint64(id)&(1<<recChunkBits-1)]
	if slot.key == 0 {
		c.n++
	}
	*slot = r
}

func (gr *groupRecords) del(id statemachine.TaskID) {
	k := uint64(id) >> recChunkBits
	c := gr.chunks[k]
	if c == nil {
		return
	}
	slot := &c.r[uint64(id)&(1<<recChunkBits-1)]
	if slot.key != 0 {
		*slot = record{}
		if c.n--; c.n == 0 {
			delete(gr.chunks, k)
		}
	}
}

// addPending lists id as pending (its record just became so).
func (gr *groupRecords) addPending(id statemachine.TaskID) {
	if n := len(gr.pending); n > 0 && gr.pending[n-1] >= id {
		gr.sorted = false
	}
	gr.pending = append(gr.pending, id)
}

// compact drops from the pending list the tasks whose record no longer
// says pending and returns the list in ascending ID order, without
// duplicates. A list that shrank to a quarter of its array moves to a
// smaller one, so a ramp's burst is not held for good.
func (gr *groupRecords) compact() []statemachine.TaskID {
	ids := gr.pending[:0]
	for _, id := range gr.pending {
		if r, ok := gr.get(id); ok && !r.live() {
			ids = append(ids, id)
		}
	}
	if !gr.sorted {
		slices.Sort(ids)
		ids = slices.Compact(ids)
		gr.sorted = true
	}
	if cap(ids) > 1<<12 && len(ids) < cap(ids)/4 {
		ids = slices.Clone(ids)
	}
	gr.pending = ids
	return ids
}

// incremental is the driver's kept scan. The driver's run lock owns it.
type incremental struct {
	valid  bool
	table  *sched.Table
	keys   map[svcRef]uint32
	groups []groupRecords // by group; index 0 unused
	live   int            // live records: tasks reserved in the table
	// res are the reservations live records name (index 0 unused), and
	// resIdx their indexes: a handful of distinct specs.
	res    []resources
	resIdx map[resources]uint32
	// lastRes and lastRef/lastKey are the last reservation and service
	// key looked up: a run's assignments and an entry's tasks come a
	// batch, a service at a time (0: none).
	lastRes uint32
	lastRef svcRef
	lastKey uint32
	// fails notes the failed tasks update meets (nil: none), at now (unix
	// nanoseconds, the run's start).
	fails *failureLog
	now   int64
}

// resIndex returns r's index in in.res, adding it if new.
func (in *incremental) resIndex(r resources) uint32 {
	if i := in.lastRes; i != 0 && in.res[i] == r {
		return i
	}
	i, ok := in.resIdx[r]
	if !ok {
		i = uint32(len(in.res))
		in.res = append(in.res, r)
		in.resIdx[r] = i
	}
	in.lastRes = i
	return i
}

// key returns the service's key in the table, numbering it if new.
func (in *incremental) key(ref svcRef) uint32 {
	if in.lastKey != 0 && in.lastRef == ref {
		return in.lastKey
	}
	key := in.keys[ref]
	if key == 0 {
		key = uint32(len(in.keys) + 1)
		in.keys[ref] = key
	}
	in.lastRef, in.lastKey = ref, key
	return key
}

// candidate reports whether t is a pending task the scheduler places once
// its restart delay passed (scanGroup's test, without the time).
func candidate(t *statemachine.Task) bool {
	return t.Status.State == statemachine.StatePending && !t.Desired.Stopping()
}

// liveTask reports whether t holds resources on its node (scanGroup's test).
func liveTask(t *statemachine.Task) bool {
	st := t.Status.State
	return st >= statemachine.StateAssigned && st <= statemachine.StateRunning && t.Node != 0
}

// rebuild scans every group into a fresh table and records.
func (in *incremental) rebuild(c Cluster) error {
	in.valid = false
	in.table, in.keys, in.live = sched.NewTable(), make(map[svcRef]uint32), 0
	in.res, in.resIdx = []resources{{}}, make(map[resources]uint32)
	in.lastRes, in.lastKey = 0, 0
	err := c.ReadLocal(route.ClusterGroup, func(s *statemachine.State) {
		for _, id := range s.NodeIDs() {
			in.table.UpsertNode(schedNode(s.Node(id)))
		}
	})
	if err != nil {
		return err
	}
	groups := c.Groups()
	in.groups = make([]groupRecords, groups+1)
	for g := 1; g <= groups; g++ {
		gr := &in.groups[g]
		*gr = groupRecords{chunks: make(map[uint64]*recChunk), sorted: true,
			version: make(map[statemachine.ServiceID]uint32)}
		err := c.ReadLocal(g, func(s *statemachine.State) {
			for t := range s.TasksInOrder() {
				in.update(g, s, t.ID, t)
			}
		})
		if err != nil {
			return err
		}
	}
	in.valid = true
	return nil
}

// update brings task id's record in group g up to date with t (nil: the
// task is gone), moving its reservation in the table. s is read-locked.
func (in *incremental) update(g int, s *statemachine.State, id statemachine.TaskID, t *statemachine.Task) {
	if t != nil && t.Status.State >= statemachine.StateFailed {
		in.fails.note(g, t, in.now)
	}
	gr := &in.groups[g]
	old, had := gr.get(id)
	if had && t != nil && in.unchanged(s, old, t) {
		return
	}
	var now record
	var has bool
	if t != nil && (liveTask(t) || candidate(t)) {
		if svc := s.Service(t.Service); svc != nil {
			key := in.key(svcRef{g, svc.ID})
			if _, seen := gr.version[svc.ID]; !seen {
				gr.version[svc.ID] = svc.SpecVersion
			}
			now, has = record{key: key}, true
			if liveTask(t) {
				spec, _ := svc.SpecAt(t.SpecVersion)
				now = record{node: uint32(t.Node), key: key, res: in.resIndex(resources{spec.CPU, spec.Memory})}
				if _, _, _, ok := in.table.Reserved(now.node); !ok {
					has = false // a task on a node the table lacks holds nothing (as in the full scan)
				}
			}
		}
	}
	if had && has && old == now {
		return
	}
	if had {
		if old.live() {
			r := in.res[old.res]
			_ = in.table.RemoveTask(old.node, old.key, r.cpu, r.mem)
			in.live--
		}
		gr.del(id)
	}
	if has {
		if now.live() {
			r := in.res[now.res]
			_ = in.table.AddTask(now.node, now.key, r.cpu, r.mem)
			in.live++
		} else if !had || old.live() {
			gr.addPending(id)
		}
		gr.set(id, now)
	}
}

// unchanged reports whether t's record old is what update would make of t
// again, without its look-ups: most touches of a task in a ramp (its
// assignment's own entry, then preparing, starting, running) leave a live
// task live on the same node. The record's key and reservation follow from
// the task's service and spec version, which a task keeps; while the kept
// scan is valid the service's spec version has not moved since the record
// was made (a move rebuilds) and the record's node is in the table (a node
// removed rebuilds), so only the service's presence is looked up again.
func (in *incremental) unchanged(s *statemachine.State, old record, t *statemachine.Task) bool {
	if old.live() {
		if !liveTask(t) || uint32(t.Node) != old.node {
			return false
		}
	} else if !candidate(t) {
		return false
	}
	return s.Service(t.Service) != nil
}

// refresh applies what the tracker collected; false when a full scan is
// needed instead.
func (in *incremental) refresh(c Cluster, touchedBy []touched) (bool, error) {
	if len(in.groups) != c.Groups()+1 {
		return false, nil
	}
	if len(touchedBy) > 0 && len(touchedBy[0].nodes) > 0 {
		same := true
		err := c.ReadLocal(route.ClusterGroup, func(s *statemachine.State) {
			for _, id := range touchedBy[0].nodes {
				n := s.Node(id)
				_, _, _, had := in.table.Reserved(uint32(id))
				if (n != nil) != had {
					same = false // added or removed: the full scan's rows and counts
					return
				}
				if n != nil {
					in.table.UpsertNode(schedNode(n))
				}
			}
		})
		if err != nil || !same {
			return false, err
		}
	}
	for g := 1; g < len(touchedBy) && g < len(in.groups); g++ {
		tc := touchedBy[g]
		if len(tc.tasks) == 0 && len(tc.services) == 0 {
			continue
		}
		ok := true
		gr := &in.groups[g]
		err := c.ReadLocal(g, func(s *statemachine.State) {
			for _, id := range tc.services {
				svc := s.Service(id)
				if svc == nil {
					continue
				}
				if v, seen := gr.version[id]; seen && v != svc.SpecVersion {
					ok = false
					return
				}
			}
			for _, id := range tc.tasks {
				in.update(g, s, id, s.Task(id))
			}
		})
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// batches collects the pending tasks into batches as the full scan does
// (by group, service and spec version; each batch's tasks in ID order),
// leaving out those whose restart delay has not passed at now.
func (in *incremental) batches(c Cluster, now int64, cons *consCache) ([]*batch, RunStats, error) {
	var out []*batch
	var stats RunStats
	stats.Nodes, stats.Live = in.table.Len(), in.live
	for g := 1; g < len(in.groups); g++ {
		gr := &in.groups[g]
		ids := gr.compact()
		if len(ids) == 0 {
			continue
		}
		err := c.ReadLocal(g, func(s *statemachine.State) {
			infos := make(map[statemachine.ServiceID]*svcInfo)
			for _, id := range ids {
				t := s.Task(id)
				if t == nil || (t.AfterReject() && t.StartAt() > now) {
					continue
				}
				inf := infos[t.Service]
				if inf == nil {
					svc := s.Service(t.Service)
					if svc == nil {
						continue
					}
					inf = &svcInfo{key: in.keys[svcRef{g, svc.ID}], svc: svc}
					infos[t.Service] = inf
				}
				b := inf.batches[t.SpecVersion]
				if b == nil {
					b = newBatch(g, inf, t.SpecVersion, cons)
					if inf.batches == nil {
						inf.batches = make(map[uint32]*batch)
					}
					inf.batches[t.SpecVersion] = b
					out = append(out, b)
				}
				b.tasks = append(b.tasks, t.ID)
				b.msgs = append(b.msgs, t.Message())
				if b.global {
					b.slots = append(b.slots, t.Slot)
				}
				stats.Pending++
			}
		})
		if err != nil {
			return nil, RunStats{}, err
		}
	}
	slices.SortFunc(out, func(a, b *batch) int { return a.compare(b.batchKey) })
	stats.Batches = len(out)
	return out, stats, nil
}

// placed records an assignment the group committed: the plan reserved it
// in the table already, so the task's record says so.
func (in *incremental) placed(a assignment) {
	task := a.task
	if a.group <= 0 || a.group >= len(in.groups) {
		in.valid = false
		return
	}
	gr := &in.groups[a.group]
	if old, had := gr.get(task); had && old.live() {
		in.valid = false // not pending when scanned: cannot happen
		return
	}
	gr.set(task, record{node: a.node, key: a.service, res: in.resIndex(resources{a.cpu, a.mem})})
	in.live++
}
