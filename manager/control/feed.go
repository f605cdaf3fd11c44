package control

import (
	"slices"
	"sync"
	"sync/atomic"

	"shoal/statemachine"
)

// Feed follows what this replica applies, from the engine's OnApply hook:
// the applied index of every group (for blocking reads), a bounded ring of
// recent changes (for the event stream) and, per node, a bounded journal of
// changes to its assignment set (for incremental assignment frames).
//
// OnApply runs on the apply goroutine under the group's write lock, so a
// reader holding a group's read lock (Reader.ReadLocal) sees the feed
// complete up to that group's state: lock order is group lock → Feed.mu →
// a journal's lock.
//
// Agents' long polls read only their own node's journal: they take its
// lock, never Feed.mu. With one feed-wide mutex, thousands of polls queued
// on it one by one while holding their groups' read locks, so every
// group's apply (which writes the feed under its write lock) waited behind
// them: at 10,000 agents one replica had 4,600 polls queued there and
// 5,755 status reports waiting for commits that could not apply.
type Feed struct {
	mu struct {
		sync.RWMutex
		applied []uint64      // per group
		changed chan struct{} // closed on every change, then replaced
		ring    []event       // events, a circular buffer
		next    uint64        // sequence number of the next event
		floor   []uint64      // per group: events at or below are gone
		// journals is nodes as the apply path reads it, under mu's write
		// lock: a lookup in a map keyed by the node itself instead of
		// sync.Map's walk of its hash trie through an interface, once per
		// assignment change.
		journals map[statemachine.NodeID]*journal
	}
	// nodes maps a node to its *journal, for readers that do not take mu;
	// journals are added under mu's write lock (to both maps) and never
	// removed.
	nodes       sync.Map
	ringSize    int
	journalSize int
	// nodeGen counts the entries that changed a node (added, changed or
	// removed one) and the states replaced by a snapshot (NodeGen).
	nodeGen atomic.Uint64
}

// Change is one event of the ring (which keeps it packed: event). Its
// sequence number is its place in the ring.
type Change struct {
	Index   uint64
	Task    statemachine.TaskID
	Node    statemachine.NodeID
	Service statemachine.ServiceID
	Group   int32
	Kind    statemachine.EffectKind
}

// event is a Change as the ring keeps it, in 24 bytes (a full ring of
// 1,048,576 is 24 MB per replica, not 32): the entry's index (43 bits), its
// group (16 bits) and the kind (5 bits) share one word. An event that does
// not fit (an index past 2^43, a group past 65,535) is not kept: the ring's
// floor for its group rises past it instead, so a reader before it resyncs.
type event struct {
	task    statemachine.TaskID
	node    statemachine.NodeID
	service statemachine.ServiceID
	key     uint64
}

const (
	evIndexBits = 43
	evIndexMax  = 1<<evIndexBits - 1
	evGroupBits = 16
	evKindBits  = 64 - evIndexBits - evGroupBits
)

// packEvent returns c as the ring keeps it; ok is false if it does not fit.
func packEvent(c Change) (e event, ok bool) {
	if c.Index > evIndexMax || c.Group < 0 || c.Group >= 1<<evGroupBits || uint64(c.Kind) >= 1<<evKindBits {
		return event{}, false
	}
	key := c.Index | uint64(c.Group)<<evIndexBits | uint64(c.Kind)<<(evIndexBits+evGroupBits)
	return event{task: c.Task, node: c.Node, service: c.Service, key: key}, true
}

func (e event) index() uint64 { return e.key & evIndexMax }
func (e event) group() int32  { return int32(e.key >> evIndexBits & (1<<evGroupBits - 1)) }

func (e event) change() Change {
	return Change{Index: e.index(), Task: e.task, Node: e.node, Service: e.service, Group: e.group(),
		Kind: statemachine.EffectKind(e.key >> (evIndexBits + evGroupBits))}
}

// journal is one node's recent assignment changes, under its own lock.
//
// The changes are a circular list of up to the feed's journalSize, kept
// in blocks of jBlock made as it fills: a journal never copies what it
// holds, and one that keeps few changes takes one block. (A slice grown by
// doubling up to 512 changes copied 504 and allocated 16 KB per node as
// it filled: 2.5 % of a leader in a 1M ramp.)
type journal struct {
	mu     sync.Mutex
	blocks [][]jentry // jBlock each, the last up to the size
	n      int        // changes held
	start  int        // position of the oldest once full (0 until then)
	floor  []uint64   // per group: changes at or below are not listed
	// wake is closed at the next change; it is made only when a poll
	// waits for one (most changes of a busy node come while none does:
	// one channel made per change was 109 of the 189 MB the journals
	// allocated in a 1M ramp).
	wake chan struct{}
}

// jentry is one change of a journal, in 16 bytes (10,000 nodes' journals
// hold up to 5 million of them): the task, and in key the group (16
// bits), whether it is an echo (1 bit) and the entry's index (47 bits).
// A change that does not fit (an index past 2^47, a group past 65,535) is
// not listed: the journal's floor rises past it instead (journal.forget),
// so a cursor before it gets a resync.
type jentry struct {
	task statemachine.TaskID
	key  uint64
}

// jBlock is how many changes a journal's block holds (1 KB).
const jBlock = 64

// each calls fn with every change the journal holds, oldest first.
func (j *journal) each(fn func(jentry)) {
	for k := range j.n {
		i := j.start + k
		if i >= j.n {
			i -= j.n
		}
		fn(j.blocks[i/jBlock][i%jBlock])
	}
}

const (
	jIndexBits = 47
	jIndexMax  = 1<<jIndexBits - 1
	jEcho      = 1 << jIndexBits
	jGroupMax  = 1<<(64-jIndexBits-1) - 1
)

// makeJentry packs a change (echo: the node's own report made the task
// terminal: send the sequence, not the task); ok is false if it does not
// fit.
func makeJentry(group int, index uint64, task statemachine.TaskID, echo bool) (e jentry, ok bool) {
	if group < 0 || group > jGroupMax || index > jIndexMax {
		return jentry{}, false
	}
	e = jentry{task: task, key: uint64(group)<<(jIndexBits+1) | index}
	if echo {
		e.key |= jEcho
	}
	return e, true
}

func (e jentry) group() int    { return int(e.key >> (jIndexBits + 1)) }
func (e jentry) index() uint64 { return e.key & jIndexMax }
func (e jentry) echo() bool    { return e.key&jEcho != 0 }

// NewFeed returns a feed for groups+1 groups whose states were applied up
// to start (one index per group; missing groups count as 0). Changes at or
// below start are unknown to it.
func NewFeed(groups int, start []uint64, ringSize, journalSize int) *Feed {
	f := &Feed{ringSize: max(ringSize, 1024), journalSize: max(journalSize, 16)}
	f.mu.applied = make([]uint64, groups+1)
	copy(f.mu.applied, start)
	f.mu.floor = append([]uint64(nil), f.mu.applied...)
	f.mu.changed = make(chan struct{})
	f.mu.journals = make(map[statemachine.NodeID]*journal)
	return f
}

// OnApply records one applied entry's effects. Plug it into
// engine.Config.OnApply.
func (f *Feed) OnApply(group int, index uint64, effects []statemachine.Effect) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if group >= len(f.mu.applied) || index <= f.mu.applied[group] {
		return
	}
	// applied moves to index once the entry's changes are recorded (at
	// the end): a journal this entry starts knows nothing before the
	// entry, but it holds the entry's own changes, so its floor is the
	// group's last applied index before it (the entries between had no
	// effects). A floor at index made a node's first change a resync:
	// every agent's first incremental poll after its COMPLETE, on every
	// replica it polled, was answered with a COMPLETE again.
	for _, e := range effects {
		if e.Kind == statemachine.EffNodeChanged {
			f.nodeGen.Add(1)
		}
		switch e.Kind {
		case statemachine.EffAssignments, statemachine.EffSeqAdvanced:
			j := f.journalLocked(e.Node)
			if je, ok := makeJentry(group, index, e.Task, e.Kind == statemachine.EffSeqAdvanced); ok {
				j.add(f, je)
			} else {
				j.forget(group, index)
			}
			f.pushLocked(Change{Group: int32(group), Index: index, Kind: e.Kind, Node: e.Node, Task: e.Task, Service: e.Service})
		case statemachine.EffPending:
		default:
			f.pushLocked(Change{Group: int32(group), Index: index, Kind: e.Kind, Node: e.Node, Task: e.Task, Service: e.Service})
		}
	}
	f.mu.applied[group] = index
	close(f.mu.changed)
	f.mu.changed = make(chan struct{})
}

func (f *Feed) pushLocked(c Change) {
	e, ok := packEvent(c)
	if !ok {
		f.mu.floor[c.Group] = max(f.mu.floor[c.Group], c.Index)
		return
	}
	seq := f.mu.next
	f.mu.next++
	if len(f.mu.ring) < f.ringSize {
		f.mu.ring = appendBounded(f.mu.ring, e, f.ringSize)
		return
	}
	i := int(seq % uint64(f.ringSize))
	old := f.mu.ring[i]
	f.mu.floor[old.group()] = max(f.mu.floor[old.group()], old.index())
	f.mu.ring[i] = e
}

// journalLocked returns node n's journal, made now if it has none; the
// caller holds mu's write lock.
func (f *Feed) journalLocked(n statemachine.NodeID) *journal {
	if j := f.mu.journals[n]; j != nil {
		return j
	}
	j := &journal{floor: append([]uint64(nil), f.mu.floor...)}
	// A journal started now knows nothing before now.
	copy(j.floor, f.mu.applied)
	f.mu.journals[n] = j
	f.nodes.Store(n, j)
	return j
}

// journalRead returns node's journal locked (the caller unlocks j.mu).
// A node without a journal yet gets one under mu's write lock (once per
// node).
func (f *Feed) journalRead(node statemachine.NodeID) *journal {
	v, ok := f.nodes.Load(node)
	if !ok {
		f.mu.Lock()
		v = f.journalLocked(node)
		f.mu.Unlock()
	}
	j := v.(*journal)
	j.mu.Lock()
	return j
}

func (j *journal) add(f *Feed, e jentry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	// The entry's own index is not yet covered: floors stay below it.
	if j.n < f.journalSize {
		if j.n%jBlock == 0 {
			j.blocks = append(j.blocks, make([]jentry, min(jBlock, f.journalSize-j.n)))
		}
		j.blocks[j.n/jBlock][j.n%jBlock] = e
		j.n++
	} else {
		b := &j.blocks[j.start/jBlock][j.start%jBlock]
		j.floor[b.group()] = max(j.floor[b.group()], b.index())
		*b = e
		if j.start++; j.start == j.n {
			j.start = 0
		}
	}
	j.wakeLocked()
}

// forget records a change of group g at index that the journal cannot
// list: changes up to it are unknown now (a cursor before it resyncs).
func (j *journal) forget(g int, index uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.floor[g] = max(j.floor[g], index)
	j.wakeLocked()
}

func (j *journal) wakeLocked() {
	if j.wake != nil {
		close(j.wake)
		j.wake = nil
	}
}

// Applied returns the index of the last entry with effects this feed saw,
// per group.
func (f *Feed) Applied() []uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]uint64(nil), f.mu.applied...)
}

// NodeGen changes whenever a node may have changed in a group's state: an
// applied entry changed a node (EffNodeChanged; a removal is one), or a
// snapshot replaced the state (Raise). OnApply and Raise run under the
// group's write lock, so NodeGen read in a read of a group's state
// (ReadLocal) goes with that state: while it stays the same, so does
// every node of that state (what the API keeps of a connection's node).
func (f *Feed) NodeGen() uint64 { return f.nodeGen.Load() }

// Changed returns the applied indexes and a channel closed at the next
// change.
func (f *Feed) Changed() ([]uint64, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]uint64(nil), f.mu.applied...), f.mu.changed
}

// nodeChanges appends to es node's assignment changes in group g after
// index `after`, in the order they were applied; ok is false if the
// journal no longer reaches back that far (the caller must resend the
// whole set). Call it under group g's read lock.
func (f *Feed) nodeChanges(es []jentry, node statemachine.NodeID, g int, after uint64) (_ []jentry, ok bool) {
	j := f.journalRead(node)
	defer j.mu.Unlock()
	if after < j.floor[g] {
		return es, false
	}
	j.each(func(e jentry) {
		if e.group() == g && e.index() > after {
			es = append(es, e)
		}
	})
	return es, true
}

// changedLocked marks in changed, for the service groups 1..len-1, where
// node's journal may hold an assignment change past cursor: the cursor is
// below the journal's floor there (the journal cannot tell), or an entry
// is past it. The cluster group (0) is never marked: it carries no
// assignments, and frames never move an agent's cursor there. (Its floor
// once counted: a journal begun after the cluster group's first change
// was behind every cursor there, and each long poll was answered at once,
// dozens of times a second per agent.) The caller holds j.mu.
func (j *journal) changedLocked(cursor []uint64, changed []bool) {
	for g := 1; g < len(changed); g++ {
		changed[g] = g >= len(j.floor) || at(cursor, g) < j.floor[g]
	}
	for k, b := range j.blocks {
		for _, e := range b[:min(len(b), j.n-k*jBlock)] {
			if g := e.group(); g > 0 && g < len(changed) && e.index() > at(cursor, g) {
				changed[g] = true
			}
		}
	}
}

// quietGroups returns, for groups 0..groups, the index up to which the
// feed knows node has no assignment change past cursor, or 0 where it may
// have one (or its journal does not reach back to cursor), and always for
// the cluster group: an incremental frame needs no read of a quiet
// group's state, and the node's cursor may move to that index. (The
// applied indexes are read first: every change at or below them is in
// the journal by then, since OnApply writes both under the feed's lock.)
//
// quiet and changed are the caller's room (groups+1 long each).
func (f *Feed) quietGroups(node statemachine.NodeID, cursor []uint64, quiet []uint64, changed []bool) {
	clear(quiet)
	v, ok := f.nodes.Load(node)
	if !ok {
		return // no journal yet: read every group
	}
	f.mu.RLock()
	copy(quiet, f.mu.applied)
	f.mu.RUnlock()
	quiet[0] = 0
	j := v.(*journal)
	clear(changed)
	j.mu.Lock()
	j.changedLocked(cursor, changed)
	j.mu.Unlock()
	for g, c := range changed {
		if c {
			quiet[g] = 0
		}
	}
}

// nodePending reports whether node may have changes in a service group
// past cursor (both mean: answer now; see changedLocked), and else a
// channel closed at the node's next change.
//
// changed is the caller's room (it may be too short; it is grown).
func (f *Feed) nodePending(node statemachine.NodeID, cursor []uint64, changed []bool) (bool, <-chan struct{}, []bool) {
	j := f.journalRead(node)
	defer j.mu.Unlock()
	if cap(changed) < len(j.floor) {
		changed = make([]bool, len(j.floor))
	}
	changed = changed[:len(j.floor)]
	clear(changed)
	j.changedLocked(cursor, changed)
	if slices.Contains(changed, true) {
		return true, nil, changed
	}
	j.dropCoveredLocked(cursor)
	if j.wake == nil {
		j.wake = make(chan struct{})
	}
	return false, j.wake, changed
}

// dropCoveredLocked empties the journal when cursor covers every entry in
// it: a poll parks up to date, so its agent has them all. A journal kept
// its entries (up to 512, 16 bytes each) until newer ones pushed them
// out: about 2 kB per node at 1M tasks / 10,000 agents, on every replica,
// for changes the agents had long had. (Only the replica a node polls
// sees its cursor: the others keep its journal, and a poll that moves
// there is still answered incrementally.) The floors rise to the entries
// dropped, so a later request from an older cursor gets a resync, never
// an incremental frame without them. Its blocks go too: a busy node's
// next change makes one block (1 kB) again. The caller holds j.mu.
func (j *journal) dropCoveredLocked(cursor []uint64) {
	if j.n == 0 {
		return
	}
	covered := true
	j.each(func(e jentry) {
		if e.index() > at(cursor, e.group()) {
			covered = false
		}
	})
	if !covered {
		return
	}
	j.each(func(e jentry) {
		g := e.group()
		j.floor[g] = max(j.floor[g], e.index())
	})
	j.blocks, j.n, j.start = nil, 0, 0
}

// Since returns up to limit events after cursor (per group) in the order
// they were applied, the cursor advanced past them, and whether the ring
// still reaches back to cursor.
func (f *Feed) Since(cursor []uint64, limit int) ([]Change, []uint64, bool) {
	out, next, _, ok := f.Page(cursor, limit, 0)
	return out, next, ok
}

// Page is Since for a reader that goes on from where its last page ended:
// from is the sequence number the last page returned as its end (0: look
// through the whole ring). Every event before it was either in a page or
// at or below the cursor then, so it is at or below the cursor now: the
// scan starts there instead of at the ring's oldest event (a stream
// paging through a full ring of 262,144 events scanned all of them for
// every page, holding the lock the apply path takes). A stream's first
// page still scans from the oldest event: a few milliseconds for a full
// ring of 1,048,576, once per stream opened.
func (f *Feed) Page(cursor []uint64, limit int, from uint64) ([]Change, []uint64, uint64, bool) {
	return f.PageInto(nil, cursor, limit, from)
}

// PageInto is Page returning the events in buf's room (buf[:0] grown as
// needed): a stream paging through the feed reuses one slice instead of
// growing a new one under the lock the apply path takes.
func (f *Feed) PageInto(buf []Change, cursor []uint64, limit int, from uint64) ([]Change, []uint64, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	next := make([]uint64, len(f.mu.applied))
	copy(next, cursor)
	for g := range f.mu.floor {
		if at(cursor, g) < f.mu.floor[g] {
			return nil, next, from, false
		}
	}
	out := buf[:0]
	first := uint64(0)
	if f.mu.next > uint64(len(f.mu.ring)) {
		first = f.mu.next - uint64(len(f.mu.ring))
	}
	seq := max(first, from)
	for ; seq < f.mu.next && limit > 0; seq++ {
		e := f.mu.ring[seq%uint64(f.ringSize)]
		group, index := e.group(), e.index()
		if len(out) > 0 && len(out) >= limit && (group != out[len(out)-1].Group || index != out[len(out)-1].Index) {
			break // never split one entry's events across pages
		}
		if g := int(group); index > at(cursor, g) {
			c := e.change()
			out = append(out, c)
			next[g] = max(next[g], c.Index)
		}
	}
	return out, next, seq, true
}

func at(c []uint64, g int) uint64 {
	if g < len(c) {
		return c[g]
	}
	return 0
}

// Raise records that group g's state was applied up to index before this
// feed saw any of it: changes at or below index are unknown (a cursor that
// old gets a resync or "index too old").
func (f *Feed) Raise(g int, index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g >= len(f.mu.applied) {
		return
	}
	f.nodeGen.Add(1)
	f.mu.applied[g] = max(f.mu.applied[g], index)
	f.mu.floor[g] = max(f.mu.floor[g], index)
	f.nodes.Range(func(_, v any) bool {
		j := v.(*journal)
		j.mu.Lock()
		j.floor[g] = max(j.floor[g], index)
		j.mu.Unlock()
		return true
	})
}

// appendBounded appends v to s, which never holds more than size: when s
// is full it grows to at most size, not past it (append grew the event
// ring of 1,048,576 to room for 1.2 million, 6 MB never used).
func appendBounded[T any](s []T, v T, size int) []T {
	if len(s) == cap(s) {
		grown := make([]T, len(s), min(max(2*cap(s), 8), size))
		copy(grown, s)
		s = grown
	}
	return append(s, v)
}
