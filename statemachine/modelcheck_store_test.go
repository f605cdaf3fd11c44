package statemachine

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/klauspost/compress/s2"
)

// The model checker's memory: what it keeps per state, and how it finds a
// trace again. TLC keeps 64-bit fingerprints of the states it has seen and
// only the states still to expand; so does this checker. A state that has
// been expanded is no longer kept, only its parent and the index of the
// action that reached it (8 bytes), from which a trace is replayed.

// mcSet is a set of 64-bit fingerprints: open addressing, linear probing,
// at most half full, 8 bytes a slot (Go's map takes about 4 times that).
// Zero marks an empty slot, so the fingerprint 0 is stored as 1 (one more
// collision in 2^64).
type mcSet struct {
	slots []uint64
	n     int
}

func newMCSet(capacity int) *mcSet {
	size := 1024
	for size < 2*capacity {
		size *= 2
	}
	return &mcSet{slots: make([]uint64, size)}
}

// add inserts k and reports whether it was new.
func (s *mcSet) add(k uint64) bool {
	if k == 0 {
		k = 1
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := mcMix(k) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = k
			s.n++
			return true
		case k:
			return false
		}
	}
}

func (s *mcSet) has(k uint64) bool {
	if k == 0 {
		k = 1
	}
	mask := uint64(len(s.slots) - 1)
	for i := mcMix(k) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			return false
		case k:
			return true
		}
	}
}

func (s *mcSet) grow() {
	old := s.slots
	s.slots = make([]uint64, 2*len(old))
	s.n = 0
	for _, k := range old {
		if k != 0 {
			s.add(k)
		}
	}
}

// mcMix spreads a fingerprint's bits (keys are xxhash values already; this
// guards against a weak low half).
func mcMix(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	return k
}

// mcRec is what is kept of a state once it is expanded: the state it was
// reached from, the index of the action in mcActions' list there, and the
// budgets (8 bytes).
type mcRec struct {
	parent int32
	act    uint16
	meta   mcMeta
}

// mcCompress returns canon s2-compressed, in a slice of its own size
// (s2.Encode's result keeps the capacity of the worst case, larger than
// the input).
func mcCompress(canon []byte) []byte {
	return bytes.Clone(s2.Encode(nil, canon))
}

// mcFront is a state still to expand: its record and its encoding,
// compressed (s2: about a quarter of the size, for little time).
type mcFront struct {
	idx   int32
	canon []byte
}

// mcQueue holds the states of a level still to expand: their records and
// their compressed encodings packed into large byte arenas, so that
// millions of them are a few big allocations the garbage collector need not
// scan (a slice per state cost a header, an object and marking work each).
type mcQueue struct {
	idx   []int32
	loc   []uint64 // arena<<44 | offset<<20 | length
	arena [][]byte
	bytes int64
}

// mcArenaSize is the size of one arena of a queue.
const mcArenaSize = 16 << 20 // fits the offset's 24 bits

func (q *mcQueue) len() int { return len(q.idx) }

// push appends a state; canon is copied.
func (q *mcQueue) push(idx int32, canon []byte) {
	if len(canon) >= 1<<20 {
		panic("model checker: a compressed state of 1 MiB or more")
	}
	if len(q.arena) == 0 || len(q.arena[len(q.arena)-1])+len(canon) > mcArenaSize {
		q.arena = append(q.arena, make([]byte, 0, mcArenaSize))
	}
	a := len(q.arena) - 1
	off := len(q.arena[a])
	q.arena[a] = append(q.arena[a], canon...)
	q.idx = append(q.idx, idx)
	q.loc = append(q.loc, uint64(a)<<44|uint64(off)<<20|uint64(len(canon)))
	q.bytes += int64(len(canon))
}

// at returns state i; its bytes stay valid until release passes it.
func (q *mcQueue) at(i int) mcFront {
	l := q.loc[i]
	a, off, n := l>>44, (l>>20)&(1<<24-1), l&(1<<20-1)
	return mcFront{idx: q.idx[i], canon: q.arena[a][off : off+n : off+n]}
}

// release frees the arenas that hold only states before i (expanded).
func (q *mcQueue) release(i int) {
	if i >= len(q.loc) {
		clear(q.arena)
		return
	}
	for a := range q.loc[i] >> 44 {
		q.arena[a] = nil
	}
}

// trace replays the actions that reached record i from the initial state
// and lists them, then last (the step that failed), if any.
func (c *mcChecker) trace(i int32, last string) string {
	var acts []uint16
	for ; i > 0; i = c.recs[i].parent {
		acts = append(acts, c.recs[i].act)
	}
	s := mcClone(c.init, c.b.bug)
	var m mcMeta
	var sb strings.Builder
	step := 0
	for j := len(acts) - 1; j >= 0; j-- {
		list := mcActions(s, m, c.b, false)
		a := list[acts[j]]
		step++
		fmt.Fprintf(&sb, "  %d. %s\n", step, a.desc)
		after := s.Clone()
		after.Apply([]Command{a.cmd}, 0, a.time(), &Output{})
		if a.event {
			m.events++
		}
		if a.meta != nil {
			a.meta(&m)
		}
		s = after
	}
	if last != "" {
		fmt.Fprintf(&sb, "  %d. %s\n", step+1, last)
	}
	return sb.String()
}
