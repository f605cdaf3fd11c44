package control

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"shoal/statemachine"
)

// Property: reading the event ring page by page from any cursor the feed
// gave out yields every event after it exactly once, in order, and a page
// never splits one entry's events; a reader that starts each scan where
// its last page ended (page's from) reads the same pages.
func TestFeedPagesLoseAndRepeatNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		groups := rapid.IntRange(1, 3).Draw(t, "groups")
		f := NewFeed(groups, nil, 1024, 16)
		next := make([]uint64, groups+1)
		var all []Change
		for range rapid.IntRange(0, 60).Draw(t, "entries") {
			g := rapid.IntRange(0, groups).Draw(t, "group")
			next[g]++
			n := rapid.IntRange(1, 5).Draw(t, "effects")
			effs := make([]statemachine.Effect, n)
			for i := range effs {
				effs[i] = statemachine.Effect{Kind: statemachine.EffTaskState, Task: statemachine.TaskID(len(all) + i)}
				all = append(all, Change{Group: int32(g), Index: next[g], Task: effs[i].Task})
			}
			f.OnApply(g, next[g], effs)
		}
		limit := rapid.IntRange(1, 7).Draw(t, "page")
		var got []Change
		cursor := []uint64(nil)
		var from uint64
		for range 1000 {
			page, nc, ok := f.Since(cursor, limit)
			if !ok {
				t.Fatalf("the ring holds everything, yet cursor %v is too old", cursor)
			}
			hinted, hnc, end, _ := f.Page(cursor, limit, from)
			if !slices.Equal(hinted, page) || !slices.Equal(hnc, nc) {
				t.Fatalf("from %d: page %v (cursor %v), without the hint %v (cursor %v)", from, hinted, hnc, page, nc)
			}
			from = end
			if len(page) == 0 {
				break
			}
			last := page[len(page)-1]
			if more, _, _ := f.Since(nc, 1); len(more) > 0 && more[0].Group == last.Group && more[0].Index == last.Index {
				t.Fatalf("page split entry %d/%d", last.Group, last.Index)
			}
			got = append(got, page...)
			cursor = nc
		}
		if len(got) != len(all) {
			t.Fatalf("read %d events, applied %d", len(got), len(all))
		}
		for i := range all {
			if got[i].Task != all[i].Task {
				t.Fatalf("event %d: task %d, want %d", i, got[i].Task, all[i].Task)
			}
		}
	})
}

// A node's journal that overflowed refuses cursors it no longer covers
// (the agent then gets a COMPLETE), and still serves recent ones.
func TestJournalOverflowForcesResync(t *testing.T) {
	f := NewFeed(1, nil, 1024, 16)
	for i := uint64(1); i <= 40; i++ {
		f.OnApply(1, i, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: statemachine.TaskID(i)}})
	}
	if _, ok := f.nodeChanges(nil, 7, 1, 3); ok {
		t.Fatal("a cursor behind the journal's floor was served incrementally")
	}
	es, ok := f.nodeChanges(nil, 7, 1, 35)
	if !ok || len(es) != 5 {
		t.Fatalf("recent cursor: %d changes, ok=%v", len(es), ok)
	}
	if pending, _, _ := f.nodePending(7, []uint64{0, 40}, nil); pending {
		t.Fatal("a node with nothing new is pending")
	}
	if pending, _, _ := f.nodePending(7, []uint64{0, 2}, nil); !pending {
		t.Fatal("an old cursor must be answered at once (with a resync)")
	}
}

// BenchmarkFeedPaging: a stream pages through a full ring of 262,144
// events (8 groups, 4 events an entry), 1,000 at a time, scanning from
// where its last page ended or, as before, from the ring's oldest event.
func BenchmarkFeedPaging(b *testing.B) {
	const ring = 1 << 18
	f := NewFeed(8, nil, ring, 16)
	idx := make([]uint64, 9)
	for i := 0; i < ring/4; i++ {
		g := i%8 + 1
		idx[g]++
		effs := make([]statemachine.Effect, 4)
		for k := range effs {
			effs[k] = statemachine.Effect{Kind: statemachine.EffTaskState, Task: statemachine.TaskID(i*4 + k)}
		}
		f.OnApply(g, idx[g], effs)
	}
	for _, hint := range []bool{true, false} {
		b.Run(fmt.Sprintf("from-last-page=%t", hint), func(b *testing.B) {
			pages := 0
			for range b.N {
				cursor := []uint64(nil)
				var from uint64
				for {
					out, next, end, _ := f.Page(cursor, 1000, from)
					if len(out) == 0 {
						break
					}
					pages++
					cursor = next
					if hint {
						from = end
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
		})
	}
}

// A group is quiet for a node, up to the feed's applied index, only when
// the node's journal reaches back to the cursor there and holds no change
// past it; a node without a journal has no quiet group.
func TestQuietGroups(t *testing.T) {
	f := NewFeed(3, nil, 1024, 16)
	assign := func(g int, index uint64, node statemachine.NodeID) {
		f.OnApply(g, index, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: node, Task: statemachine.TaskID(index)}})
	}
	assign(1, 5, 7)
	f.OnApply(2, 3, []statemachine.Effect{{Kind: statemachine.EffTaskState, Task: 1}})
	assign(3, 4, 8)
	check := func(node statemachine.NodeID, cursor, want []uint64) {
		t.Helper()
		if got := quietOf(f, node, cursor, 3); !slices.Equal(got, want) {
			t.Fatalf("node %d, cursor %v: quiet %v, want %v", node, cursor, got, want)
		}
	}
	check(7, []uint64{0, 0, 0, 0}, []uint64{0, 0, 3, 4})
	check(7, []uint64{0, 5, 0, 0}, []uint64{0, 5, 3, 4})
	check(9, []uint64{0, 5, 3, 4}, []uint64{0, 0, 0, 0})
	for i := uint64(5); i <= 20; i++ { // node 7's journal holds 16: group 1's entry goes, its floor there rises to 5
		assign(3, i, 7)
	}
	check(7, []uint64{0, 5, 0, 20}, []uint64{0, 5, 3, 20})
	check(7, []uint64{0, 4, 0, 20}, []uint64{0, 0, 3, 20})
}

// An agent whose cursor is up to date in every service group is not
// pending (its long poll waits) even when the cluster group changed before
// its journal began; frames never move a cursor in the cluster group. It
// is pending once one of its service groups assigns it something.
func TestUpToDateNodeWaitsWhateverTheClusterGroupDid(t *testing.T) {
	f := NewFeed(2, nil, 1024, 16)
	f.OnApply(0, 9, []statemachine.Effect{{Kind: statemachine.EffNodeChanged, Node: 7}})
	f.OnApply(1, 5, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: 1}})
	cursor := []uint64{0, 5, 0} // as frames leave it: nothing in the cluster group
	pending, wake, _ := f.nodePending(7, cursor, nil)
	if pending || wake == nil {
		t.Fatalf("node 7, up to date at %v: pending %v; want its poll to wait", cursor, pending)
	}
	if q := quietOf(f, 7, cursor, 2); q[0] != 0 || q[1] != 5 {
		t.Fatalf("quiet groups %v; want the cluster group unread (0) and group 1 quiet up to 5", q)
	}
	f.OnApply(2, 6, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: 2}})
	select {
	case <-wake:
	default:
		t.Fatal("a new assignment did not wake the waiting poll")
	}
	if pending, _, _ := f.nodePending(7, cursor, nil); !pending {
		t.Fatal("node 7 is not pending after an assignment past its cursor")
	}
}

// quietOf is Feed.quietGroups in room of its own.
func quietOf(f *Feed, node statemachine.NodeID, cursor []uint64, groups int) []uint64 {
	quiet := make([]uint64, groups+1)
	f.quietGroups(node, cursor, quiet, make([]bool, groups+1))
	return quiet
}

// A poll that parks with a cursor past every entry of its node's journal
// empties it (its agent has them all); a later request from that cursor
// still gets what comes after, and one from an older cursor gets a
// resync, never an incremental frame missing the dropped changes. A
// cursor that does not cover the journal drops nothing.
func TestParkedPollEmptiesTheJournalItCovers(t *testing.T) {
	f := NewFeed(2, nil, 1024, 512)
	assign := func(g int, index uint64) {
		f.OnApply(g, index, []statemachine.Effect{{Kind: statemachine.EffAssignments, Node: 7, Task: statemachine.TaskID(g<<8) + statemachine.TaskID(index)}})
	}
	for i := uint64(1); i <= 40; i++ {
		assign(1, i)
	}
	for i := uint64(1); i <= 5; i++ {
		assign(2, i)
	}
	entries := func() int {
		v, _ := f.nodes.Load(statemachine.NodeID(7))
		j := v.(*journal)
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.n == 0 && len(j.blocks) > 0 {
			return -1 // blocks kept by an emptied journal
		}
		return j.n
	}
	if pending, _, _ := f.nodePending(7, []uint64{0, 30, 5}, nil); !pending {
		t.Fatal("a cursor behind the journal is not pending")
	}
	if pending, _, _ := f.nodePending(7, []uint64{0, 40, 4}, nil); !pending {
		t.Fatal("a cursor behind the journal in group 2 is not pending")
	}
	if es, ok := f.nodeChanges(nil, 7, 1, 30); !ok || len(es) != 10 {
		t.Fatalf("an uncovering cursor dropped entries: %d changes past 30, ok=%v", len(es), ok)
	}
	if pending, _, _ := f.nodePending(7, []uint64{0, 40, 5}, nil); pending {
		t.Fatal("an up-to-date cursor is pending")
	}
	if n := entries(); n != 0 {
		t.Fatalf("the journal of a node whose poll parked up to date holds %d entries (-1: its blocks), want 0", n)
	}
	if es, ok := f.nodeChanges(nil, 7, 1, 30); ok {
		t.Fatalf("a cursor older than the dropped entries was served incrementally (%d changes, without 31..40)", len(es))
	}
	if _, ok := f.nodeChanges(nil, 7, 2, 4); ok {
		t.Fatal("a cursor older than the dropped entries of group 2 was served incrementally")
	}
	assign(1, 41)
	if pending, _, _ := f.nodePending(7, []uint64{0, 40, 5}, nil); !pending {
		t.Fatal("a change after the drop is not pending")
	}
	es, ok := f.nodeChanges(nil, 7, 1, 40)
	if !ok || len(es) != 1 || es[0].index() != 41 {
		t.Fatalf("from the parked cursor: %v, ok=%v; want the one change at 41", es, ok)
	}
	if es, ok := f.nodeChanges(nil, 7, 2, 5); !ok || len(es) != 0 {
		t.Fatalf("group 2 from the parked cursor: %v, ok=%v; want nothing, incrementally", es, ok)
	}
}
