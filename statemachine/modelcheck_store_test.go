package statemachine

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

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
// A full arena goes to an unlinked temporary file, as TLC keeps its queue
// on disk: a level of tens of millions of states would not fit in memory
// beside the next one. States are read back in order, an arena at a time.
type mcQueue struct {
	idx   []int32
	loc   []uint64 // arena<<44 | offset<<20 | length
	arena [][]byte // nil: on disk (or released)
	lens  []int    // each arena's length
	file  *os.File // arena a at a*mcArenaSize; nil until one is full
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
	if len(q.arena) == 0 || q.lens[len(q.lens)-1]+len(canon) > mcArenaSize {
		if len(q.arena) > 0 {
			q.spill(len(q.arena) - 1)
		}
		q.arena = append(q.arena, make([]byte, 0, mcArenaSize))
		q.lens = append(q.lens, 0)
	}
	a := len(q.arena) - 1
	off := len(q.arena[a])
	q.arena[a] = append(q.arena[a], canon...)
	q.lens[a] = len(q.arena[a])
	q.idx = append(q.idx, idx)
	q.loc = append(q.loc, uint64(a)<<44|uint64(off)<<20|uint64(len(canon)))
	q.bytes += int64(len(canon))
}

// spill writes full arena a to the queue's file and drops it from memory.
func (q *mcQueue) spill(a int) {
	if q.file == nil {
		f, err := os.CreateTemp("", "shoal-modelcheck-*")
		if err != nil {
			panic(fmt.Sprintf("model checker: queue file: %v", err))
		}
		_ = os.Remove(f.Name()) // unlinked: gone when closed, or when the process ends
		q.file = f
	}
	if _, err := q.file.WriteAt(q.arena[a], int64(a)*mcArenaSize); err != nil {
		panic(fmt.Sprintf("model checker: queue file: %v", err))
	}
	q.arena[a] = nil
}

// load brings back into memory the arenas that hold states lo..hi-1.
func (q *mcQueue) load(lo, hi int) {
	if lo >= hi {
		return
	}
	for a := q.loc[lo] >> 44; a <= q.loc[hi-1]>>44; a++ {
		if q.arena[a] != nil {
			continue
		}
		buf := make([]byte, q.lens[a])
		if _, err := q.file.ReadAt(buf, int64(a)*mcArenaSize); err != nil {
			panic(fmt.Sprintf("model checker: queue file: %v", err))
		}
		q.arena[a] = buf
	}
}

// at returns state i, which load brought in; its bytes stay valid until
// release passes it.
func (q *mcQueue) at(i int) mcFront {
	l := q.loc[i]
	a, off, n := l>>44, (l>>20)&(1<<24-1), l&(1<<20-1)
	return mcFront{idx: q.idx[i], canon: q.arena[a][off : off+n : off+n]}
}

// release frees the arenas that hold only states before i (expanded), and
// the file once every state is.
func (q *mcQueue) release(i int) {
	if i < len(q.loc) {
		for a := range q.loc[i] >> 44 {
			q.arena[a] = nil
		}
		return
	}
	clear(q.arena)
	if q.file != nil {
		_ = q.file.Close()
		q.file = nil
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
		fmt.Fprintf(&sb, "  %d. %s\n", step, a.desc())
		after := s.Clone()
		after.Apply([]Command{a.cmd}, 0, a.time(), &Output{})
		m = a.metaAfter(m)
		s = after
	}
	if last != "" {
		fmt.Fprintf(&sb, "  %d. %s\n", step+1, last)
	}
	return sb.String()
}

// TestModelCheckQueueSpills: states pushed past an arena come back from
// the queue's file intact and in order, chunk by chunk as the checker
// reads them.
func TestModelCheckQueueSpills(t *testing.T) {
	q := &mcQueue{}
	state := func(i int) []byte {
		b := make([]byte, 300+i%500)
		for j := range b {
			b[j] = byte(i*31 + j)
		}
		return b
	}
	const n = 80000 // about 44 MiB: two arenas on disk
	for i := range n {
		q.push(int32(i), state(i))
	}
	if q.file == nil {
		t.Fatal("no arena was spilled")
	}
	for lo := 0; lo < n; lo += mcChunk {
		hi := min(lo+mcChunk, n)
		q.load(lo, hi)
		for i := lo; i < hi; i++ {
			if f := q.at(i); f.idx != int32(i) || !bytes.Equal(f.canon, state(i)) {
				t.Fatalf("state %d came back as %d (%d bytes)", i, f.idx, len(f.canon))
			}
		}
		q.release(hi)
	}
	if q.file != nil {
		t.Fatal("the queue's file is still open after the last state")
	}
}
