package control

import (
	"slices"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	"shoal/statemachine"
)

// Property: while the ring wraps under a reader that falls behind, every
// page the feed serves is the next events the reader has not read, in the
// order they were applied; the feed refuses (not ok) a cursor whose events
// it overwrote, and a reader that starts again from the applied indexes
// (a resync) goes on reading every later event.
func TestFeedRingWrapsAndRefusesWhatItLost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		groups := rapid.IntRange(1, 3).Draw(t, "groups")
		f := NewFeed(groups, nil, 1024, 16)
		f.ringSize = rapid.IntRange(4, 40).Draw(t, "ring") // small, so that it wraps
		next := make([]uint64, groups+1)
		var all []Change
		var cursor []uint64
		pos, refused := 0, 0 // pos: the next event of all the reader expects
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "apply") {
				g := rapid.IntRange(0, groups).Draw(t, "group")
				next[g]++
				effs := make([]statemachine.Effect, rapid.IntRange(1, 4).Draw(t, "effects"))
				for i := range effs {
					effs[i] = statemachine.Effect{Kind: statemachine.EffTaskState, Task: statemachine.TaskID(len(all) + 1)}
					all = append(all, Change{Group: int32(g), Index: next[g], Task: effs[i].Task, Kind: effs[i].Kind})
				}
				f.OnApply(g, next[g], effs)
				continue
			}
			page, nc, ok := f.Since(cursor, rapid.IntRange(1, 9).Draw(t, "page"))
			if !ok {
				if len(all)-pos <= f.ringSize {
					t.Fatalf("cursor %v refused with %d unread events, within a ring of %d", cursor, len(all)-pos, f.ringSize)
				}
				refused++
				cursor, pos = f.Applied(), len(all)
				continue
			}
			if want := all[pos:min(pos+len(page), len(all))]; !slices.Equal(page, want) {
				t.Fatalf("from event %d: page %v, want %v", pos, page, want)
			}
			pos += len(page)
			cursor = nc
		}
		t.Logf("%d events, %d refusals", len(all), refused)
	})
}

// The ring's entries stay 24 bytes: the default ring of 1,048,576 of them
// is 24 MB per replica once full (32 MB as Changes).
func TestRingEventIsTwentyFourBytes(t *testing.T) {
	if n := unsafe.Sizeof(event{}); n > 24 {
		t.Fatalf("a ring entry takes %d bytes, want at most 24", n)
	}
}

// An event keeps every field of its change at the ends of their ranges; a
// change that does not fit (an index past 2^43, a group past 65,535) is not
// kept, and a reader before it is refused (it resyncs) while one at it
// reads on.
func TestRingEventsKeepTheirChange(t *testing.T) {
	for _, c := range []Change{
		{Index: 1, Task: 1, Node: 1, Service: 1, Group: 0, Kind: statemachine.EffAssignments},
		{Index: evIndexMax, Task: 1<<64 - 1, Node: 1<<32 - 1, Service: 1<<32 - 1, Group: 1<<16 - 1, Kind: 1<<evKindBits - 1},
		{Index: 1 << 42, Task: 7 << 48, Node: 3, Service: 9, Group: 1 << 15, Kind: statemachine.EffTaskDesired},
	} {
		e, ok := packEvent(c)
		if !ok || e.change() != c {
			t.Fatalf("%+v kept as %+v (ok %v)", c, e.change(), ok)
		}
	}
	for _, c := range []Change{{Index: evIndexMax + 1}, {Index: 1, Group: 1 << 16}, {Index: 1, Group: -1}, {Index: 1, Kind: 1 << evKindBits}} {
		if _, ok := packEvent(c); ok {
			t.Fatalf("%+v fits, want not", c)
		}
	}

	f := NewFeed(1, nil, 1024, 16)
	f.OnApply(1, 5, []statemachine.Effect{{Kind: statemachine.EffTaskState, Task: 1}})
	f.OnApply(1, evIndexMax+2, []statemachine.Effect{{Kind: statemachine.EffTaskState, Task: 2}})
	if _, _, ok := f.Since([]uint64{0, 5}, 10); ok {
		t.Fatal("a reader before the event the ring could not keep reads on; want a refusal")
	}
	page, _, ok := f.Since([]uint64{0, evIndexMax + 2}, 10)
	if !ok || len(page) != 0 {
		t.Fatalf("a reader at the unkept event got %v (ok %v), want nothing more", page, ok)
	}
	page, _, ok = f.Since([]uint64{0, 4}, 10)
	if ok {
		t.Fatalf("a reader before both events got %v, want a refusal", page)
	}
}

// The ring and a journal never take room for more changes than they
// keep: a ring of 3,000 events holds room for 3,000 once full, a journal
// of 100 for 100.
func TestFeedRoomIsBounded(t *testing.T) {
	f := NewFeed(1, nil, 3000, 100)
	for i := uint64(1); i <= 5000; i++ {
		f.OnApply(1, i, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: statemachine.TaskID(i)}})
	}
	v, _ := f.nodes.Load(statemachine.NodeID(7))
	room := 0
	for _, b := range v.(*journal).blocks {
		room += cap(b)
	}
	if r, j := cap(f.mu.ring), room; r != 3000 || j != 100 {
		t.Fatalf("room for %d events and %d journal entries; want 3000 and 100", r, j)
	}
}

// A journal entry keeps its group, index and echo; a change whose index
// does not fit in one is not listed, and a cursor before it gets a
// resync (the poll is woken for it) while one at it is served.
func TestJournalEntryPacking(t *testing.T) {
	for _, c := range []struct {
		g     int
		index uint64
		echo  bool
	}{{0, 1, false}, {1, 12345, true}, {65535, jIndexMax, true}, {7, jIndexMax - 1, false}} {
		e, ok := makeJentry(c.g, c.index, 99, c.echo)
		if !ok || e.group() != c.g || e.index() != c.index || e.echo() != c.echo || e.task != 99 {
			t.Fatalf("%+v: packed as group %d index %d echo %v task %d (ok %v)", c, e.group(), e.index(), e.echo(), e.task, ok)
		}
	}
	if _, ok := makeJentry(1, jIndexMax+1, 1, false); ok {
		t.Fatal("an index past 2^47 was packed")
	}
	f := NewFeed(1, nil, 1024, 16)
	f.OnApply(1, 5, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: 1}})
	_, wake, _ := f.nodePending(7, []uint64{0, 5}, nil)
	big := uint64(jIndexMax + 10)
	f.OnApply(1, big, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: 2}})
	select {
	case <-wake:
	default:
		t.Fatal("a change the journal cannot list did not wake the poll")
	}
	if _, ok := f.nodeChanges(nil, 7, 1, 5); ok {
		t.Fatal("a cursor before an unlisted change was served incrementally")
	}
	if es, ok := f.nodeChanges(nil, 7, 1, big); !ok || len(es) != 0 {
		t.Fatalf("a cursor at the unlisted change: %d changes, ok %v; want none, served", len(es), ok)
	}
}
