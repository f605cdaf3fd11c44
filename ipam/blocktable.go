package ipam

// blockTable holds a number per block of a pool (0 by default): its owner,
// or how many of its addresses are held or quarantined. It is as long as
// the highest block ever set, not the subnet: blocks are leased lowest
// first, so one service group's copy of a network sized for eight groups
// with headroom (a /14 of 4,096 blocks, each replica holding one per
// network and group) touches a few dozen of them. Two tables of every
// block took 32 kB of the 59 kB such a pool held (BenchmarkHeapPerPool).
type blockTable struct {
	v     []uint32
	limit uint32 // blocks in the subnet: the table never grows past it
}

func newBlockTable(blocks uint32) blockTable { return blockTable{limit: blocks} }

func (t *blockTable) get(b uint32) uint32 {
	if int(b) < len(t.v) {
		return t.v[b]
	}
	return 0
}

// set sets block b (below limit) to x.
func (t *blockTable) set(b, x uint32) {
	if int(b) >= len(t.v) {
		if x == 0 {
			return
		}
		t.v = growZeroed(t.v, int(b)+1, int(t.limit))
	}
	t.v[b] = x
}

func (t *blockTable) inc(b uint32) { t.set(b, t.get(b)+1) }
func (t *blockTable) dec(b uint32) { t.set(b, t.get(b)-1) }

func (t blockTable) clone() blockTable {
	if t.v == nil {
		return t
	}
	c := t
	c.v = append(make([]uint32, 0, len(t.v)), t.v...)
	return c
}

// growZeroed returns s lengthened to n with zeros; its room doubles, up to
// limit.
func growZeroed[T any](s []T, n, limit int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	grown := make([]T, n, max(min(2*cap(s), limit), n, min(8, limit)))
	copy(grown, s)
	return grown
}
