package sched

import (
	"fmt"
	"maps"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// Node describes one node as the scheduler needs it.
type Node struct {
	ID           uint32
	Hostname     string
	Role         Role
	Status       NodeStatus
	Availability Availability
	CPU          int64             // capacity, milli-cores
	Mem          int64             // capacity, bytes
	Labels       map[string]string // node labels; nil means none
}

// Task is one task that holds resources on a node (used to rebuild a table
// from a snapshot).
type Task struct {
	Node    uint32
	Service uint32
	CPU     int64 // reservation, milli-cores
	Mem     int64 // reservation, bytes
}

// Table is the columnar node table: one slice per attribute, indexed by row,
// plus roaring bitmaps over rows for the set-valued attributes. Rows of
// removed nodes are reused by later nodes; a row's position never influences
// a placement decision (ties are broken by node ID hashes).
//
// Memory: about 60 bytes per node plus 4 bytes per node for every service
// that currently has tasks in the table.
type Table struct {
	row map[uint32]int32 // node ID → row

	// Columns, indexed by row.
	id       []uint32
	live     []bool
	hostname []string
	role     []Role
	status   []NodeStatus
	avail    []Availability
	cpuCap   []int64
	memCap   []int64
	cpuRes   []int64
	memRes   []int64
	total    []uint32            // tasks of all services
	labels   []map[string]string // owned copy of the node's labels

	services map[uint32]*serviceColumn
	byLabel  map[string]*labelIndex
	roles    [2]*roaring.Bitmap // rows per role
	sched    *roaring.Bitmap    // live ∧ ready ∧ active
	free     []int32            // reusable rows, used last-in first-out

	scratch scratch
}

// serviceColumn counts one service's tasks per row.
type serviceColumn struct {
	count []uint32 // by row; rows past the end hold zero
	tasks int      // sum of count
}

// labelIndex holds, for one label key, the rows that carry the key and the
// rows per value.
type labelIndex struct {
	rows   *roaring.Bitmap
	values map[string]*roaring.Bitmap
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{
		row:      make(map[uint32]int32),
		services: make(map[uint32]*serviceColumn),
		byLabel:  make(map[string]*labelIndex),
		roles:    [2]*roaring.Bitmap{roaring.New(), roaring.New()},
		sched:    roaring.New(),
	}
}

// NewTableFrom rebuilds a table from a snapshot: nodes, then the tasks that
// hold resources on them. A task on an unknown node is an error.
func NewTableFrom(nodes []Node, tasks []Task) (*Table, error) {
	t := NewTable()
	for _, n := range nodes {
		t.UpsertNode(n)
	}
	for _, tk := range tasks {
		if err := t.AddTask(tk.Node, tk.Service, tk.CPU, tk.Mem); err != nil {
			return nil, fmt.Errorf("sched: rebuild from snapshot: %w", err)
		}
	}
	return t, nil
}

// Len returns the number of nodes in the table.
func (t *Table) Len() int { return len(t.row) }

// UpsertNode adds a node or replaces its description. The tasks and
// reservations already recorded on an existing node are kept.
func (t *Table) UpsertNode(n Node) {
	r, ok := t.row[n.ID]
	if !ok {
		r = t.newRow(n.ID)
	} else {
		t.unindexLabels(r)
		t.roles[roleIndex(t.role[r])].Remove(uint32(r))
	}
	t.hostname[r] = n.Hostname
	t.role[r] = n.Role
	t.roles[roleIndex(n.Role)].Add(uint32(r))
	t.cpuCap[r] = n.CPU
	t.memCap[r] = n.Mem
	t.labels[r] = maps.Clone(n.Labels)
	t.indexLabels(r)
	t.status[r] = n.Status
	t.avail[r] = n.Availability
	t.updateSchedulable(r)
}

func (t *Table) newRow(id uint32) int32 {
	var r int32
	if k := len(t.free); k > 0 {
		r = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		r = int32(len(t.id))
		t.id = append(t.id, 0)
		t.live = append(t.live, false)
		t.hostname = append(t.hostname, "")
		t.role = append(t.role, 0)
		t.status = append(t.status, 0)
		t.avail = append(t.avail, 0)
		t.cpuCap = append(t.cpuCap, 0)
		t.memCap = append(t.memCap, 0)
		t.cpuRes = append(t.cpuRes, 0)
		t.memRes = append(t.memRes, 0)
		t.total = append(t.total, 0)
		t.labels = append(t.labels, nil)
	}
	t.row[id] = r
	t.id[r] = id
	t.live[r] = true
	return r
}

// RemoveNode deletes a node and everything recorded on it. It reports
// whether the node was present.
func (t *Table) RemoveNode(id uint32) bool {
	r, ok := t.row[id]
	if !ok {
		return false
	}
	t.unindexLabels(r)
	t.roles[roleIndex(t.role[r])].Remove(uint32(r))
	t.sched.Remove(uint32(r))
	if t.total[r] > 0 {
		for svc, col := range t.services {
			if int(r) < len(col.count) && col.count[r] > 0 {
				col.tasks -= int(col.count[r])
				col.count[r] = 0
				if col.tasks == 0 {
					delete(t.services, svc)
				}
			}
		}
	}
	delete(t.row, id)
	t.id[r], t.live[r], t.hostname[r], t.labels[r] = 0, false, "", nil
	t.role[r], t.status[r], t.avail[r] = 0, 0, 0
	t.cpuCap[r], t.memCap[r], t.cpuRes[r], t.memRes[r], t.total[r] = 0, 0, 0, 0, 0
	t.free = append(t.free, r)
	return true
}

// SetStatus changes a node's status.
func (t *Table) SetStatus(id uint32, s NodeStatus) error {
	r, ok := t.row[id]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownNode, id)
	}
	t.status[r] = s
	t.updateSchedulable(r)
	return nil
}

// SetAvailability changes a node's availability.
func (t *Table) SetAvailability(id uint32, a Availability) error {
	r, ok := t.row[id]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownNode, id)
	}
	t.avail[r] = a
	t.updateSchedulable(r)
	return nil
}

func (t *Table) updateSchedulable(r int32) {
	if t.live[r] && t.status[r] == StatusReady && t.avail[r] == AvailabilityActive {
		t.sched.Add(uint32(r))
	} else {
		t.sched.Remove(uint32(r))
	}
}

// AddTask records one task of service on node, reserving cpu milli-cores
// and mem bytes. It does not check fit: the table records what runs.
func (t *Table) AddTask(node, service uint32, cpu, mem int64) error {
	r, ok := t.row[node]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownNode, node)
	}
	t.commit(r, t.column(service), 1, cpu, mem)
	return nil
}

// RemoveTask releases one task of service on node and its reservation.
func (t *Table) RemoveTask(node, service uint32, cpu, mem int64) error {
	r, ok := t.row[node]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownNode, node)
	}
	col := t.services[service]
	if col == nil || int(r) >= len(col.count) || col.count[r] == 0 {
		return fmt.Errorf("%w: node %d has no task of service %d", ErrNoSuchTask, node, service)
	}
	col.count[r]--
	col.tasks--
	if col.tasks == 0 {
		delete(t.services, service)
	}
	t.total[r]--
	t.cpuRes[r] -= cpu
	t.memRes[r] -= mem
	return nil
}

// column returns service's count column, creating it with one entry per row.
func (t *Table) column(service uint32) *serviceColumn {
	col := t.services[service]
	if col == nil {
		col = &serviceColumn{count: make([]uint32, len(t.id))}
		t.services[service] = col
	}
	if len(col.count) < len(t.id) {
		col.count = append(col.count, make([]uint32, len(t.id)-len(col.count))...)
	}
	return col
}

// commit records n tasks of one group on row r.
func (t *Table) commit(r int32, col *serviceColumn, n uint32, cpu, mem int64) {
	col.count[r] += n
	col.tasks += int(n)
	t.total[r] += n
	t.cpuRes[r] += int64(n) * cpu
	t.memRes[r] += int64(n) * mem
}

func (t *Table) indexLabels(r int32) {
	for k, v := range t.labels[r] {
		li := t.byLabel[k]
		if li == nil {
			li = &labelIndex{rows: roaring.New(), values: make(map[string]*roaring.Bitmap)}
			t.byLabel[k] = li
		}
		li.rows.Add(uint32(r))
		bm := li.values[v]
		if bm == nil {
			bm = roaring.New()
			li.values[v] = bm
		}
		bm.Add(uint32(r))
	}
}

func (t *Table) unindexLabels(r int32) {
	for k, v := range t.labels[r] {
		li := t.byLabel[k]
		li.rows.Remove(uint32(r))
		if bm := li.values[v]; bm != nil {
			bm.Remove(uint32(r))
			if bm.IsEmpty() {
				delete(li.values, v)
			}
		}
		if li.rows.IsEmpty() {
			delete(t.byLabel, k)
		}
	}
}

// labelRows returns the rows whose label key equals value, or nil.
func (t *Table) labelRows(key, value string) *roaring.Bitmap {
	if li := t.byLabel[key]; li != nil {
		return li.values[value]
	}
	return nil
}

// Node returns the description of node id.
func (t *Table) Node(id uint32) (Node, bool) {
	r, ok := t.row[id]
	if !ok {
		return Node{}, false
	}
	return Node{
		ID: id, Hostname: t.hostname[r], Role: t.role[r], Status: t.status[r],
		Availability: t.avail[r], CPU: t.cpuCap[r], Mem: t.memCap[r],
		Labels: maps.Clone(t.labels[r]),
	}, true
}

// NodeIDs returns the IDs of all nodes, ascending.
func (t *Table) NodeIDs() []uint32 {
	return slices.Sorted(maps.Keys(t.row))
}

// Reserved returns the CPU (milli-cores) and memory (bytes) reserved on a
// node and its number of tasks of all services.
func (t *Table) Reserved(id uint32) (cpu, mem int64, tasks uint32, ok bool) {
	r, ok := t.row[id]
	if !ok {
		return 0, 0, 0, false
	}
	return t.cpuRes[r], t.memRes[r], t.total[r], true
}

// ServiceTasks returns the number of tasks of service on node id.
func (t *Table) ServiceTasks(id, service uint32) uint32 {
	r, ok := t.row[id]
	if !ok {
		return 0
	}
	return t.serviceCount(service, r)
}

func (t *Table) serviceCount(service uint32, r int32) uint32 {
	col := t.services[service]
	if col == nil || int(r) >= len(col.count) {
		return 0
	}
	return col.count[r]
}

// Clone returns a deep copy of the table (with fresh scratch buffers).
func (t *Table) Clone() *Table {
	c := &Table{
		row:      maps.Clone(t.row),
		id:       slices.Clone(t.id),
		live:     slices.Clone(t.live),
		hostname: slices.Clone(t.hostname),
		role:     slices.Clone(t.role),
		status:   slices.Clone(t.status),
		avail:    slices.Clone(t.avail),
		cpuCap:   slices.Clone(t.cpuCap),
		memCap:   slices.Clone(t.memCap),
		cpuRes:   slices.Clone(t.cpuRes),
		memRes:   slices.Clone(t.memRes),
		total:    slices.Clone(t.total),
		labels:   slices.Clone(t.labels), // label maps are never mutated in place
		services: make(map[uint32]*serviceColumn, len(t.services)),
		byLabel:  make(map[string]*labelIndex, len(t.byLabel)),
		roles:    [2]*roaring.Bitmap{t.roles[0].Clone(), t.roles[1].Clone()},
		sched:    t.sched.Clone(),
		free:     slices.Clone(t.free),
	}
	for s, col := range t.services {
		c.services[s] = &serviceColumn{count: slices.Clone(col.count), tasks: col.tasks}
	}
	for k, li := range t.byLabel {
		nli := &labelIndex{rows: li.rows.Clone(), values: make(map[string]*roaring.Bitmap, len(li.values))}
		for v, bm := range li.values {
			nli.values[v] = bm.Clone()
		}
		c.byLabel[k] = nli
	}
	return c
}

// roleIndex maps a role to its bitmap in Table.roles: anything that is not
// a manager is a worker.
func roleIndex(r Role) int {
	if r == RoleManager {
		return 1
	}
	return 0
}
