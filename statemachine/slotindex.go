package statemachine

import (
	"iter"
	"slices"
)

// slotIndex is a service's slots by number. Slot numbers are small and
// dense (a replicated service's run from 1 to about its replicas; a global
// service's are node IDs, given in sequence), so most live in a slice
// indexed by number; a number far beyond the others goes to a map. A map
// of every slot took about 25 bytes a slot and its insert a third of a
// microsecond per created task; the slice takes 8.
type slotIndex struct {
	dense  []*slot          // dense[n]: slot n (nil: none)
	sparse map[uint32]*slot // slots numbered len(dense) and beyond
	n      int
}

// denseSlack is how far past the slice's end a new slot number may be and
// still grow the slice to hold it (beyond it, and beyond twice the slice,
// it goes to the map).
const denseSlack = 64

func (x *slotIndex) get(n uint32) *slot {
	if int(n) < len(x.dense) {
		return x.dense[n]
	}
	return x.sparse[n]
}

func (x *slotIndex) len() int { return x.n }

// set stores sl (non-nil) as slot n.
func (x *slotIndex) set(n uint32, sl *slot) {
	if int(n) < len(x.dense) {
		if x.dense[n] == nil {
			x.n++
		}
		x.dense[n] = sl
		return
	}
	if int(n) < max(2*len(x.dense), denseSlack) {
		x.dense = append(x.dense, make([]*slot, int(n)+1-len(x.dense))...)
		x.dense = x.dense[:cap(x.dense)]
		// The slice's new room takes the map's slots numbered within it.
		for k, s := range x.sparse {
			if int(k) < len(x.dense) {
				x.dense[k] = s
				delete(x.sparse, k)
			}
		}
		x.dense[n] = sl
		x.n++
		return
	}
	if x.sparse == nil {
		x.sparse = make(map[uint32]*slot)
	}
	if x.sparse[n] == nil {
		x.n++
	}
	x.sparse[n] = sl
}

// del removes slot n, if there is one.
func (x *slotIndex) del(n uint32) {
	switch {
	case int(n) < len(x.dense):
		if x.dense[n] == nil {
			return
		}
		x.dense[n] = nil
	case x.sparse[n] != nil:
		delete(x.sparse, n)
	default:
		return
	}
	x.n--
	if x.n == 0 {
		*x = slotIndex{} // a service scaled to zero keeps no room
	}
}

// all ranges over the slots in increasing number.
func (x *slotIndex) all() iter.Seq2[uint32, *slot] {
	return func(yield func(uint32, *slot) bool) {
		for n, sl := range x.dense {
			if sl != nil && !yield(uint32(n), sl) {
				return
			}
		}
		if len(x.sparse) == 0 {
			return
		}
		for _, n := range sortedKeys(x.sparse) {
			if sl := x.sparse[n]; sl != nil && !yield(n, sl) { // nil: deleted meanwhile
				return
			}
		}
	}
}

// keys lists the slot numbers in increasing order.
func (x *slotIndex) keys() []uint32 {
	out := make([]uint32, 0, x.n)
	for n := range x.all() {
		out = append(out, n)
	}
	return slices.Clip(out)
}
