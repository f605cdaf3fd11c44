package control

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"shoal/statemachine"
)

// sliceJournal is the journal as one slice, circular once full: the
// blocks' model.
type sliceJournal struct {
	entries []jentry
	start   int
	floor   []uint64
}

func (j *sliceJournal) add(size int, e jentry) {
	if len(j.entries) < size {
		j.entries = append(j.entries, e)
		return
	}
	old := j.entries[j.start]
	j.floor[old.group()] = max(j.floor[old.group()], old.index())
	j.entries[j.start] = e
	j.start = (j.start + 1) % len(j.entries)
}

// drop is a parked poll's: a poll that does not return at once (no
// service group has a change past cursor, or a floor above it) empties
// the journal when cursor covers every entry, the floors rising to them.
func (j *sliceJournal) drop(cursor []uint64) {
	for g := 1; g < len(j.floor); g++ {
		if es, ok := j.changes(g, at(cursor, g)); !ok || len(es) > 0 {
			return
		}
	}
	for _, e := range j.entries {
		if e.index() > at(cursor, e.group()) {
			return
		}
	}
	for _, e := range j.entries {
		j.floor[e.group()] = max(j.floor[e.group()], e.index())
	}
	j.entries, j.start = nil, 0
}

func (j *sliceJournal) changes(g int, after uint64) ([]jentry, bool) {
	if after < j.floor[g] {
		return nil, false
	}
	var es []jentry
	for i := range j.entries {
		if e := j.entries[(j.start+i)%len(j.entries)]; e.group() == g && e.index() > after {
			es = append(es, e)
		}
	}
	return es, true
}

// Property: a journal's blocks list the same changes, in the same order,
// with the same floors, as one circular slice of the journal's size would,
// after every step of a random history of changes over a few groups (some
// not listable), raised floors and polls parking (which empty a journal
// their cursor covers), for journal sizes below, at and past a
// block's; and the room taken never exceeds the size.
func TestJournalBlocksAreACircularSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const groups = 3
		size := rapid.SampledFrom([]int{16, 17, 63, 64, 65, 128, 130, 512}).Draw(t, "size")
		f := NewFeed(groups, nil, 1024, size)
		node := statemachine.NodeID(7)
		f.mu.Lock()
		j := f.journalLocked(node)
		f.mu.Unlock()
		model := &sliceJournal{floor: slices.Clone(j.floor)}
		// Polls park seldom or often: a journal wraps between them, or
		// never fills.
		parkOdds := rapid.SampledFrom([]int{3, 30, 300}).Draw(t, "parkOdds")
		index := make([]uint64, groups+1)
		for step := range rapid.IntRange(1, 3*size).Draw(t, "steps") {
			g := rapid.IntRange(0, groups).Draw(t, "group")
			index[g] += rapid.Uint64Range(1, 3).Draw(t, "gap")
			if rapid.IntRange(0, parkOdds).Draw(t, "park") == 0 {
				// A poll parks at a cursor (most often up to date).
				cursor := slices.Clone(index)
				if rapid.Bool().Draw(t, "behind") {
					cursor[g] = rapid.Uint64Range(0, index[g]).Draw(t, "parked")
				}
				f.nodePending(node, cursor, nil)
				model.drop(cursor)
			}
			switch rapid.IntRange(0, 19).Draw(t, "op") {
			case 0: // a floor raised (a snapshot)
				f.Raise(g, index[g])
				model.floor[g] = max(model.floor[g], index[g])
			case 1: // a change the journal cannot list (OnApply's forget)
				j.forget(g, index[g])
				model.floor[g] = max(model.floor[g], index[g])
			default:
				task := statemachine.TaskID(step + 1)
				echo := rapid.Bool().Draw(t, "echo")
				kind := statemachine.EffAssignments
				if echo {
					kind = statemachine.EffSeqAdvanced
				}
				f.OnApply(g, index[g], []statemachine.Effect{{Kind: kind, Node: node, Task: task}})
				e, _ := makeJentry(g, index[g], task, echo)
				model.add(size, e)
			}
			room := 0
			for _, b := range j.blocks {
				room += cap(b)
			}
			if room > size {
				t.Fatalf("step %d: room for %d changes in a journal of %d", step, room, size)
			}
			if !slices.Equal(j.floor, model.floor) {
				t.Fatalf("step %d: floors %v, want %v", step, j.floor, model.floor)
			}
			for cg := range groups + 1 {
				for _, after := range []uint64{0, model.floor[cg], max(model.floor[cg], index[cg]/2), index[cg]} {
					got, ok := f.nodeChanges(nil, node, cg, after)
					want, wok := model.changes(cg, after)
					if ok != wok || !slices.Equal(got, want) {
						t.Fatalf("step %d: group %d after %d: %v (ok %v), want %v (ok %v)", step, cg, after, got, ok, want, wok)
					}
				}
			}
			cursor := make([]uint64, groups+1)
			for cg := range cursor {
				cursor[cg] = rapid.Uint64Range(0, index[cg]).Draw(t, "cursor")
			}
			changed := make([]bool, groups+1)
			j.mu.Lock()
			j.changedLocked(cursor, changed)
			j.mu.Unlock()
			for cg := 1; cg <= groups; cg++ {
				es, ok := model.changes(cg, cursor[cg])
				if want := !ok || len(es) > 0; changed[cg] != want {
					t.Fatalf("step %d: group %d changed past %d: %v, want %v", step, cg, cursor[cg], changed[cg], want)
				}
			}
		}
	})
}
