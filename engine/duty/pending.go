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
	nodes    bool // the cluster group changed a node
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
			g.nodes = true
		case e.Kind == statemachine.EffServiceChanged:
			g.services = append(g.services, e.Service)
		case e.Task != 0:
			g.tasks = append(g.tasks, e.Task)
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
// reservation in the table, or a pending task's place in a batch.
type record struct {
	live     bool
	node     uint32
	key      uint32
	cpu, mem int64
}

// groupRecords are one service group's tracked tasks.
type groupRecords struct {
	recs    map[statemachine.TaskID]record
	pending map[statemachine.TaskID]struct{}
	// version is each service's spec version when it was last looked at:
	// a task two versions behind reserves the current spec (SpecAt), so
	// a move of the version changes reservations no task effect names.
	version map[statemachine.ServiceID]uint32
}

// incremental is the driver's kept scan. The driver's run lock owns it.
type incremental struct {
	valid  bool
	table  *sched.Table
	nodes  []uint32 // the node IDs in the table, ascending
	keys   map[svcRef]uint32
	groups []groupRecords // by group; index 0 unused
	live   int            // live records: tasks reserved in the table
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
	in.table, in.keys, in.nodes, in.live = sched.NewTable(), make(map[svcRef]uint32), nil, 0
	err := c.ReadLocal(route.ClusterGroup, func(s *statemachine.State) {
		for _, id := range s.NodeIDs() {
			in.table.UpsertNode(schedNode(s.Node(id)))
			in.nodes = append(in.nodes, uint32(id))
		}
	})
	if err != nil {
		return err
	}
	groups := c.Groups()
	in.groups = make([]groupRecords, groups+1)
	for g := 1; g <= groups; g++ {
		gr := &in.groups[g]
		*gr = groupRecords{recs: make(map[statemachine.TaskID]record), pending: make(map[statemachine.TaskID]struct{}),
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
	gr := &in.groups[g]
	old, had := gr.recs[id]
	var now record
	var has bool
	if t != nil && (liveTask(t) || candidate(t)) {
		if svc := s.Service(t.Service); svc != nil {
			ref := svcRef{g, svc.ID}
			key := in.keys[ref]
			if key == 0 {
				key = uint32(len(in.keys) + 1)
				in.keys[ref] = key
			}
			if _, seen := gr.version[svc.ID]; !seen {
				gr.version[svc.ID] = svc.SpecVersion
			}
			now, has = record{key: key}, true
			if liveTask(t) {
				spec, _ := svc.SpecAt(t.SpecVersion)
				now = record{live: true, node: uint32(t.Node), key: key, cpu: spec.CPU, mem: spec.Memory}
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
		if old.live {
			_ = in.table.RemoveTask(old.node, old.key, old.cpu, old.mem)
			in.live--
		}
		delete(gr.recs, id)
		delete(gr.pending, id)
	}
	if has {
		if now.live {
			_ = in.table.AddTask(now.node, now.key, now.cpu, now.mem)
			in.live++
		} else {
			gr.pending[id] = struct{}{}
		}
		gr.recs[id] = now
	}
}

// refresh applies what the tracker collected; false when a full scan is
// needed instead.
func (in *incremental) refresh(c Cluster, touchedBy []touched) (bool, error) {
	if len(in.groups) != c.Groups()+1 {
		return false, nil
	}
	if len(touchedBy) > 0 && touchedBy[0].nodes {
		same := true
		err := c.ReadLocal(route.ClusterGroup, func(s *statemachine.State) {
			ids := s.NodeIDs()
			if len(ids) != len(in.nodes) {
				same = false
				return
			}
			for i, id := range ids {
				if uint32(id) != in.nodes[i] {
					same = false
					return
				}
			}
			for _, id := range ids {
				in.table.UpsertNode(schedNode(s.Node(id)))
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
	var ids []statemachine.TaskID
	for g := 1; g < len(in.groups); g++ {
		gr := &in.groups[g]
		if len(gr.pending) == 0 {
			continue
		}
		ids = ids[:0]
		for id := range gr.pending {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		err := c.ReadLocal(g, func(s *statemachine.State) {
			infos := make(map[statemachine.ServiceID]*svcInfo)
			for _, id := range ids {
				t := s.Task(id)
				if t == nil || (t.AfterReject && t.StartAt > now) {
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
				b.msgs = append(b.msgs, t.Status.Message)
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
func (in *incremental) placed(task statemachine.TaskID, a assignment) {
	if a.group <= 0 || a.group >= len(in.groups) {
		in.valid = false
		return
	}
	gr := &in.groups[a.group]
	if old, had := gr.recs[task]; had && old.live {
		in.valid = false // not pending when scanned: cannot happen
		return
	}
	delete(gr.pending, task)
	gr.recs[task] = record{live: true, node: a.node, key: a.service, cpu: a.cpu, mem: a.mem}
	in.live++
}
