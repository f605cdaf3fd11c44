package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"shoal/internal/mix"
)

// Request is a placement request: a batch of identical tasks of one
// service to place (not a Raft group).
type Request struct {
	Service     uint32
	SpecVersion uint64       // mixed into the tie-break seed
	Count       int          // tasks to place; at most MaxRequestCount
	CPU         int64        // reservation per task, milli-cores; 0 = none
	Mem         int64        // reservation per task, bytes; 0 = none
	Constraints []Constraint // all must hold (see ParseConstraint)
	MaxPerNode  int          // max tasks of Service per node; 0 = unlimited
	// Preferences are spread descriptors, outermost first, e.g.
	// ["node.labels.zone", "node.labels.rack"]: the group is split evenly
	// across the values of the first label (nodes without the label form
	// their own branch), each branch across the values of the next, and so
	// on (SwarmKit's placement preferences). Unlike SwarmKit, a node
	// without the label and a node whose label is "" are in different
	// branches, and a branch counts the tasks of the service only on its
	// nodes that pass the filters (ready, active, constraints), since tasks
	// on down, paused or drained nodes are about to move.
	Preferences []string
	Strategy    Strategy // within a preference branch; default Spread
	// Avoid lists nodes (IDs, any order) ranked after every other node:
	// they take only the tasks no other node that passes the filters has
	// room for, placed among them as the preferences and strategy say.
	// The caller names the nodes where the service's tasks kept failing
	// (SwarmKit ranks such a node last the same way). An avoided node is
	// never refused, so a task never stays pending because of it. Eligible
	// and CheckNode ignore it.
	Avoid []uint32
}

// MaxRequestCount bounds Request.Count.
const MaxRequestCount = math.MaxInt32

// Placement is the outcome of Place: how many tasks went to which node.
// Its slices belong to the table and are overwritten by the next Place;
// call Clone to keep them.
type Placement struct {
	Placed int      // tasks placed, ≤ Request.Count
	Nodes  []uint32 // node IDs, ascending
	Counts []uint32 // Counts[i] tasks went to Nodes[i]; each > 0
}

// Clone returns a copy of p that does not share memory with the table.
func (p Placement) Clone() Placement {
	return Placement{Placed: p.Placed, Nodes: slices.Clone(p.Nodes), Counts: slices.Clone(p.Counts)}
}

// Assignments appends the node of each placed task to dst, in task order
// (the tasks of Nodes[0] first), and returns the extended slice.
func (p Placement) Assignments(dst []uint32) []uint32 {
	for i, id := range p.Nodes {
		for range p.Counts[i] {
			dst = append(dst, id)
		}
	}
	return dst
}

// scratch holds the buffers Place reuses from call to call, so the
// placement loop allocates nothing per node.
type scratch struct {
	cand  *roaring.Bitmap // candidate rows
	match *roaring.Bitmap // rows matching a hostname constraint
	rows  []uint32        // filtered rows, partitioned by preference branch
	tmp   []uint32        // partition buffer
	room  []int64         // by row: how many more tasks of the group fit
	code  [][]int32       // per preference level, by row: value code
	vals  [][]string      // per preference level, by code: label value
	cnt   []int           // per code: rows in the branch being split
	keys  []string        // preference label keys
	items []fillItem      // stack of branches and leaf rows being filled
	pairs []uint64        // node ID << 32 | count
	nodes []uint32        // Placement.Nodes
	count []uint32        // Placement.Counts
	avoid []uint32        // rows of Request.Avoid that passed the filters

	// The group being placed.
	g    Request
	n    int64
	col  *serviceColumn
	seed uint64
}

// Place places g.Count tasks of g on the table's nodes and records them in
// the table (reservations and task counts). Ties are broken by a hash of
// seed and the group, so the same table, group and seed always give the
// same placement. If not every task fits it places what fits and returns
// the placement with an *UnplacedError (errors.Is ErrNoSuitableNode).
func (t *Table) Place(g Request, seed uint64) (Placement, error) {
	if err := validateRequest(g); err != nil {
		return Placement{}, err
	}
	p := &t.scratch
	if err := p.parsePreferences(g.Preferences); err != nil {
		return Placement{}, err
	}
	if g.Count == 0 {
		return Placement{}, nil
	}
	p.g, p.n, p.col, p.seed = g, int64(g.Count), t.column(g.Service), groupSeed(g, seed)
	defer func() { p.g, p.col = Request{}, nil }()
	t.filterRows()

	// Score and select, committing as each leaf is filled: the nodes to
	// avoid first take nothing, then only what the others had no room for.
	p.pairs = p.pairs[:0]
	t.prepareLevels()
	t.holdAvoided()
	want := p.n
	placed := t.spread(0, 0, len(p.rows), want)
	if placed < want && len(p.avoid) > 0 {
		placed += t.placeAvoided(want - placed)
	}

	slices.Sort(p.pairs)
	p.nodes, p.count = p.nodes[:0], p.count[:0]
	for _, x := range p.pairs {
		p.nodes = append(p.nodes, uint32(x>>32))
		p.count = append(p.count, uint32(x))
	}
	pl := Placement{Placed: int(placed), Nodes: p.nodes, Counts: p.count}
	var err error
	if placed < want {
		err = &UnplacedError{Service: g.Service, Wanted: g.Count, Placed: pl.Placed, Why: t.explain(g)}
	}
	if p.col.tasks == 0 {
		delete(t.services, g.Service)
	}
	return pl, err
}

// holdAvoided takes the room of the filtered rows of the request's Avoid
// nodes away, remembering those rows in p.avoid: one map lookup per
// avoided node, none per task or per row.
func (t *Table) holdAvoided() {
	p := &t.scratch
	p.avoid = p.avoid[:0]
	for _, id := range p.g.Avoid {
		r, ok := t.row[id]
		if !ok || !p.cand.Contains(uint32(r)) || p.room[r] == 0 {
			continue
		}
		p.room[r] = 0
		p.avoid = append(p.avoid, uint32(r))
	}
}

// placeAvoided places n tasks the other rows had no room for on the
// avoided rows, as spread would, and returns how many it placed. Every
// other filtered row is full by now (a fill stops short only when each
// row took its whole room), so it keeps no room.
func (t *Table) placeAvoided(n int64) int64 {
	p := &t.scratch
	for _, r := range p.rows {
		p.room[r] = 0
	}
	p.n = n
	for _, r := range p.avoid {
		p.room[r] = t.room(int32(r))
	}
	return t.spread(0, 0, len(p.rows), n)
}

// Eligible appends to dst the IDs of the nodes that can take one more task
// of g (ascending) and returns the extended slice: the nodes where
// CheckNode returns nil, for instance where a global service must run.
func (t *Table) Eligible(g Request, dst []uint32) ([]uint32, error) {
	if err := validateRequest(g); err != nil {
		return dst, err
	}
	p := &t.scratch
	p.g, p.n, p.col = g, 1, t.column(g.Service)
	defer func() { p.g, p.col = Request{}, nil }()
	t.filterRows()
	start := len(dst)
	for _, r := range p.rows {
		if p.room[r] > 0 {
			dst = append(dst, t.id[r])
		}
	}
	if p.col.tasks == 0 {
		delete(t.services, g.Service)
	}
	slices.Sort(dst[start:])
	return dst, nil
}

// filterRows is the filter stage for the group in scratch: the schedulable
// rows (ready and active), narrowed by each constraint, go to p.rows, and
// each gets its room (how many more tasks fit) in p.room.
func (t *Table) filterRows() {
	p := &t.scratch
	if p.cand == nil {
		p.cand, p.match = roaring.New(), roaring.New()
	}
	p.cand.Clear()
	p.cand.Or(t.sched)
	for _, c := range p.g.Constraints {
		t.filter(c, p.cand)
	}
	p.rows = grow(p.rows, int(p.cand.GetCardinality()))
	p.cand.ManyIterator().NextMany(p.rows)
	p.room = grow(p.room, len(t.id))
	for _, r := range p.rows {
		p.room[r] = t.room(int32(r))
	}
}

func validateRequest(g Request) error {
	switch {
	case g.Count < 0 || g.Count > MaxRequestCount:
		return fmt.Errorf("%w: count %d out of range [0, %d]", ErrInvalidRequest, g.Count, MaxRequestCount)
	case g.CPU < 0:
		return fmt.Errorf("%w: negative CPU reservation %d", ErrInvalidRequest, g.CPU)
	case g.Mem < 0:
		return fmt.Errorf("%w: negative memory reservation %d", ErrInvalidRequest, g.Mem)
	case g.MaxPerNode < 0:
		return fmt.Errorf("%w: negative max replicas per node %d", ErrInvalidRequest, g.MaxPerNode)
	case g.Strategy > BinPack:
		return fmt.Errorf("%w: unknown strategy %s", ErrInvalidRequest, g.Strategy)
	}
	return nil
}

// CheckPreferences reports whether every placement preference is a spread
// descriptor Place accepts ("node.labels.<key>"); the error wraps
// ErrInvalidPreference.
func CheckPreferences(prefs []string) error {
	for _, s := range prefs {
		if k, ok := strings.CutPrefix(strings.TrimSpace(s), "node.labels."); !ok || k == "" {
			return fmt.Errorf("%w %q: want node.labels.<key>", ErrInvalidPreference, s)
		}
	}
	return nil
}

func (p *scratch) parsePreferences(prefs []string) error {
	p.keys = p.keys[:0]
	for _, s := range prefs {
		k, ok := strings.CutPrefix(strings.TrimSpace(s), "node.labels.")
		if !ok || k == "" {
			return fmt.Errorf("%w %q: want node.labels.<key>", ErrInvalidPreference, s)
		}
		p.keys = append(p.keys, k)
	}
	return nil
}

// room returns how many more tasks of the group row r takes: limited by
// free CPU, free memory, max replicas per node and the group's size.
func (t *Table) room(r int32) int64 {
	p := &t.scratch
	k := p.n
	if c := p.g.CPU; c > 0 {
		k = min(k, max(t.cpuCap[r]-t.cpuRes[r], 0)/c)
	}
	if m := p.g.Mem; m > 0 {
		k = min(k, max(t.memCap[r]-t.memRes[r], 0)/m)
	}
	if mx := p.g.MaxPerNode; mx > 0 {
		k = min(k, max(int64(mx)-int64(p.col.count[r]), 0))
	}
	return k
}

// prepareLevels computes, for each preference level, a value code for every
// filtered row: codes index p.vals[level], and rows without the label get
// the code len(p.vals[level]).
func (t *Table) prepareLevels() {
	p := &t.scratch
	for len(p.code) < len(p.keys) {
		p.code = append(p.code, nil)
		p.vals = append(p.vals, nil)
	}
	for lv, key := range p.keys {
		code := grow(p.code[lv], len(t.id))
		p.code[lv] = code
		vals := p.vals[lv][:0]
		var li *labelIndex
		if li = t.byLabel[key]; li != nil {
			for v := range li.values {
				vals = append(vals, v)
			}
		}
		p.vals[lv] = vals
		missing := int32(len(vals))
		for _, r := range p.rows {
			code[r] = missing
		}
		for i, v := range vals {
			li.values[v].Iterate(func(r uint32) bool {
				code[r] = int32(i)
				return true
			})
		}
		if len(p.cnt) < len(vals)+1 {
			p.cnt = make([]int, len(vals)+1)
		}
	}
	p.tmp = grow(p.tmp, len(p.rows))
}

// spread places n tasks on the rows p.rows[lo:hi], splitting them across
// the values of preference level lv and below, and returns how many it
// placed. Branches are water-filled like nodes: the branch with the fewest
// tasks of the service (on its filtered nodes) gets the next task, as long
// as one of its nodes has room; ties go by a seeded hash of the label value.
func (t *Table) spread(lv, lo, hi int, n int64) int64 {
	p := &t.scratch
	if lv == len(p.keys) {
		return t.leaf(lo, hi, n)
	}
	code, nv := p.code[lv], len(p.vals[lv])
	rows := p.rows[lo:hi]

	// Counting sort of rows by code; one branch per code present.
	cnt := p.cnt[:nv+1]
	clear(cnt)
	for _, r := range rows {
		cnt[code[r]]++
	}
	base := len(p.items)
	off := lo
	for v, c := range cnt {
		if c == 0 {
			continue
		}
		b := fillItem{lo: int32(off), hi: int32(off + c)}
		if v == nv {
			b.k1, b.id = mix.Mix64(p.seed^missingLabel), 1
		} else {
			b.val = p.vals[lv][v]
			b.k1 = mix.Mix64(p.seed ^ hashString(b.val))
		}
		p.items = append(p.items, b)
		cnt[v] = off
		off += c
	}
	tmp := p.tmp[:len(rows)]
	for _, r := range rows {
		tmp[cnt[code[r]]-lo] = r
		cnt[code[r]]++
	}
	copy(rows, tmp)

	// Each branch's tasks of the service and room.
	col := p.col.count
	for i := base; i < len(p.items); i++ {
		b := &p.items[i]
		for _, r := range p.rows[b.lo:b.hi] {
			b.base += int64(col[r])
			b.room += p.room[r]
		}
	}
	waterFill(p.items[base:], n)
	var placed int64
	for i := base; i < len(p.items); i++ {
		if b := p.items[i]; b.give > 0 {
			placed += t.spread(lv+1, int(b.lo), int(b.hi), b.give)
		}
	}
	p.items = p.items[:base]
	return placed
}

// leaf places n tasks on the rows p.rows[lo:hi] by the group's strategy,
// commits them to the table and returns how many it placed.
func (t *Table) leaf(lo, hi int, n int64) int64 {
	p := &t.scratch
	base := len(p.items)
	col := p.col.count
	for _, r := range p.rows[lo:hi] {
		k := p.room[r]
		if k <= 0 {
			continue
		}
		it := fillItem{base: int64(col[r]), room: k, ref: int32(r), id: uint64(t.id[r])}
		it.k2 = mix.Mix64(p.seed ^ it.id)
		if p.g.Strategy == BinPack {
			it.base, it.k1 = 0, ^t.load(int32(r))
		} else {
			it.k1 = uint64(t.total[r]) - uint64(col[r])
		}
		p.items = append(p.items, it)
	}
	items := p.items[base:]
	var placed int64
	if p.g.Strategy == BinPack {
		placed = fillInOrder(items, n)
	} else {
		placed = waterFill(items, n)
	}
	for _, it := range items {
		if it.give > 0 {
			t.commit(it.ref, p.col, uint32(it.give), p.g.CPU, p.g.Mem)
			p.pairs = append(p.pairs, uint64(t.id[it.ref])<<32|uint64(it.give))
		}
	}
	p.items = p.items[:base]
	return placed
}

// grow returns s resized to n elements, reusing its array when it can.
// The contents are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
