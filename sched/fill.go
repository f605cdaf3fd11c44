package sched

import (
	"math"
	"math/bits"
	"slices"

	"shoal/internal/mix"
)

// fillItem is one node (in a leaf) or one preference branch being filled.
type fillItem struct {
	base int64 // tasks of the service it already has (spread level)
	room int64 // how many more tasks it takes
	give int64 // how many it gets (output)
	// Tie order among items: k1, then k2, then id, then val, ascending.
	// Leaf rows: k1 = other tasks (spread) or ^load (bin-pack), k2 = seeded
	// hash of the node ID, id = node ID. Branches: k1 = seeded hash of the
	// label value, id = 1 for the "label missing" branch, val = the value.
	k1, k2 uint64
	id     uint64
	val    string
	ref    int32 // leaf: table row
	lo, hi int32 // branch: its rows in scratch.rows
}

func compareItems(a, b fillItem) int {
	switch {
	case a.k1 != b.k1:
		return cmpUint(a.k1, b.k1)
	case a.k2 != b.k2:
		return cmpUint(a.k2, b.k2)
	case a.id != b.id:
		return cmpUint(a.id, b.id)
	}
	switch {
	case a.val < b.val:
		return -1
	case a.val > b.val:
		return 1
	}
	return 0
}

func cmpUint(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// waterFill gives n tasks to items one level at a time: with L(i) = base +
// give, the next task always goes to an item with room and the lowest L,
// ties broken by the items' tie order. This is exactly what handing out
// the tasks one by one does (each task raises its item by one, so all items
// at level L fill, in tie order, before any reaches L+1), computed as a
// water level: binary search for the level W the tasks reach, give every
// item up to W-1, then the r leftover tasks to the first r items (in tie
// order) still at W-1 with room. It returns how many tasks it gave (fewer
// than n only if the items' room runs out) and may reorder items.
func waterFill(items []fillItem, n int64) int64 {
	var total, atLo int64
	lo, hi := int64(math.MaxInt64), int64(0)
	for i := range items {
		it := &items[i]
		it.give = 0
		if it.room <= 0 {
			it.room = 0
			continue
		}
		total += it.room
		if it.base < lo {
			lo, atLo = it.base, 0
		}
		if it.base == lo {
			atLo++
		}
		hi = max(hi, it.base+it.room)
	}
	if total <= n {
		for i := range items {
			items[i].give = items[i].room
		}
		return total
	}
	if n <= 0 {
		return 0
	}
	// filled(lo) = 0 < n ≤ filled(hi) = total: find the smallest W with
	// filled(W) ≥ n. filled(lo+1) is the number of items at the lowest
	// level (each has room for one): when that is n or more, W is lo+1
	// without a search (a new service's tasks on nodes that have none).
	if atLo >= n {
		hi = lo + 1
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if filled(items, mid) >= n {
			hi = mid
		} else {
			lo = mid
		}
	}
	level := hi - 1
	var given int64
	c := 0 // items at the level with room for one more go to the front
	for i := range items {
		it := &items[i]
		it.give = min(max(level-it.base, 0), it.room)
		given += it.give
		if it.base+it.give == level && it.give < it.room {
			items[c], items[i] = items[i], items[c]
			c++
		}
	}
	r := n - given // 1 ≤ r ≤ c by the choice of level
	if r < int64(c) {
		selectFirst(items[:c], int(r))
	}
	for i := range r {
		items[i].give++
	}
	return n
}

// filled returns how many tasks the items take when filled up to level w.
func filled(items []fillItem, w int64) int64 {
	var s int64
	for i := range items {
		s += min(max(w-items[i].base, 0), items[i].room)
	}
	return s
}

// selectFirst reorders items so that its first k are the k smallest in tie
// order (in any order among themselves). Quickselect with a
// median-of-three pivot; the tie order is total, so the chosen set is
// deterministic.
func selectFirst(items []fillItem, k int) {
	lo, hi := 0, len(items) // the boundary k lies in [lo, hi)
	for hi-lo > 16 {
		mid := lo + (hi-lo)/2
		// Median of three to items[mid].
		if compareItems(items[mid], items[lo]) < 0 {
			items[mid], items[lo] = items[lo], items[mid]
		}
		if compareItems(items[hi-1], items[mid]) < 0 {
			items[hi-1], items[mid] = items[mid], items[hi-1]
			if compareItems(items[mid], items[lo]) < 0 {
				items[mid], items[lo] = items[lo], items[mid]
			}
		}
		pivot := items[mid]
		items[mid], items[hi-1] = items[hi-1], items[mid]
		store := lo
		for i := lo; i < hi-1; i++ {
			if compareItems(items[i], pivot) < 0 {
				items[store], items[i] = items[i], items[store]
				store++
			}
		}
		items[store], items[hi-1] = items[hi-1], items[store]
		switch {
		case store == k || store+1 == k:
			return
		case store > k:
			hi = store
		default:
			lo = store + 1
		}
	}
	slices.SortFunc(items[lo:hi], compareItems)
}

// fillInOrder gives each item, in tie order, as many of the n tasks as it
// has room for (bin-pack), and returns how many it gave.
func fillInOrder(items []fillItem, n int64) int64 {
	slices.SortFunc(items, compareItems)
	left := n
	for i := range items {
		g := min(max(items[i].room, 0), left)
		items[i].give = g
		left -= g
	}
	return n - left
}

// load returns the dominant share of row r's reserved resources, as a
// fraction of 2³² (integer arithmetic, so it is the same on every machine).
func (t *Table) load(r int32) uint64 {
	return max(share(t.cpuRes[r], t.cpuCap[r]), share(t.memRes[r], t.memCap[r]))
}

func share(res, capacity int64) uint64 {
	switch {
	case res <= 0:
		return 0
	case capacity <= 0 || res >= capacity:
		return 1 << 32
	}
	hi, lo := bits.Mul64(uint64(res), 1<<32)
	q, _ := bits.Div64(hi, lo, uint64(capacity)) // hi < capacity as res < capacity
	return q
}

// missingLabel is hashed in place of a label value for the branch of nodes
// that lack the label.
const missingLabel = 0x6d697373696e6721

// groupSeed mixes the caller's seed with the group's identity, so two
// services placed with the same seed break ties differently.
func groupSeed(g Request, seed uint64) uint64 {
	s := mix.Mix64(seed ^ 0x5ca1ab1e)
	s = mix.Mix64(s ^ uint64(g.Service))
	return mix.Mix64(s ^ g.SpecVersion)
}

// hashString is 64-bit FNV-1a.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
