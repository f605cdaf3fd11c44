package statemachine

import (
	"fmt"
	"maps"
	"slices"
)

// DiffDerived lists where two states differ in what the canonical encoding
// does not carry but Apply reads: the indexes rebuilt on load (waiting,
// delayed, unknown, updating: the entries decisions read; entries a live
// index drops lazily are left out), the order of each slot's tasks and the
// end-of-batch marks, which must be empty between Apply calls. For a live
// state a and the state loaded from a's own snapshot, any line is a replay
// bug: a restarted replica would go on differently. (The order of a node's
// task list is not compared: it depends on history, and every decision
// that reads it in order sorts it first.) At most limit lines.
func DiffDerived(a, b *State, limit int) []string {
	var out []string
	add := func(format string, args ...any) {
		if len(out) < limit {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	keys := func(name string, x, y []uint64) {
		if !slices.Equal(x, y) {
			add("%s index: %v vs %v", name, onlyIn(x, y), onlyIn(y, x))
		}
	}
	keys("waiting", u64s(a.waitingIDs()), u64s(b.waitingIDs()))
	keys("delayed", filtered(a, a.delayed, delayedFacts), filtered(b, b.delayed, delayedFacts))
	keys("unknown", filtered(a, a.unknown, heldAsideFacts), filtered(b, b.unknown, heldAsideFacts))
	keys("updating", u64s(sortedKeys(a.updating)), u64s(sortedKeys(b.updating)))
	for _, st := range []*State{a, b} {
		if len(st.dirty) > 0 || len(st.newTasks) > 0 {
			add("end-of-batch lists not empty: %d dirty services, %d new tasks", len(st.dirty), len(st.newTasks))
		}
		for _, id := range sortedKeys(st.services) {
			svc := st.services[id]
			if svc.queued || svc.full || len(svc.dirtySlots) > 0 {
				add("service %d keeps marks between batches: queued=%v full=%v slots=%v", id, svc.queued, svc.full, svc.dirtySlots)
			}
			for _, n := range svc.slots.keys() {
				if svc.slots.get(n).dirty {
					add("service %d slot %d stays marked dirty between batches", id, n)
				}
			}
		}
	}
	for _, id := range sortedKeys(a.services) {
		sa, sb := a.services[id], b.services[id]
		if sb == nil {
			continue
		}
		for _, n := range sa.slots.keys() {
			x, y := sa.slots.get(n), sb.slots.get(n)
			if y == nil || !slices.EqualFunc(x.tasks(), y.tasks(), func(p, q *Task) bool { return p.ID == q.ID }) {
				add("service %d slot %d lists its tasks in another order", id, n)
			}
		}
	}
	if !maps.Equal(a.managers, b.managers) {
		add("managers differ")
	}
	return out
}

// filtered returns the IDs in index whose task passes keep, in order.
func filtered(s *State, index map[TaskID]*Task, keep func(*Task, *Node) bool) []uint64 {
	var out []uint64
	for _, id := range sortedKeys(index) {
		if t := index[id]; keep(t, s.nodes[t.Node]) {
			out = append(out, uint64(id))
		}
	}
	return out
}

func u64s[K ~uint32 | ~uint64](ks []K) []uint64 {
	out := make([]uint64, len(ks))
	for i, k := range ks {
		out[i] = uint64(k)
	}
	return out
}

// onlyIn returns the members of x not in y (both sorted), at most 8.
func onlyIn(x, y []uint64) []uint64 {
	var out []uint64
	for _, v := range x {
		if _, ok := slices.BinarySearch(y, v); !ok && len(out) < 8 {
			out = append(out, v)
		}
	}
	return out
}
