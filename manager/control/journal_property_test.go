package control

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"shoal/statemachine"
)

// Property: a node's journal answers a cursor the feed gave out (its
// applied indexes at some moment) with exactly the node's changes past
// it, in order, and asks for a resync only where it cannot know them: a
// cursor below what the journal knew when it began. A journal begun by
// an applied entry (the node's first change) holds that entry's changes,
// so it knows everything after the group's previous applied index — an
// agent that polled last before its node's first change is answered
// incrementally, not with a COMPLETE. Entries without effects never
// reach the feed (index gaps); the journal never overflows here.
func TestPropertyJournalAnswersWhatItKnows(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const groups, nodes = 2, 3
		f := NewFeed(groups, nil, 1024, 256)
		type change struct {
			g     int
			index uint64
			task  statemachine.TaskID
		}
		var model [nodes + 1][]change           // every change per node
		var known [nodes + 1][groups + 1]uint64 // the journal's floor, from when it began
		var begun [nodes + 1]bool
		applied := make([]uint64, groups+1)
		cursors := [][]uint64{slices.Clone(applied)}
		begin := func(n int, floor []uint64) {
			if !begun[n] {
				begun[n] = true
				copy(known[n][:], floor)
			}
		}
		task := statemachine.TaskID(0)
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0, 1: // an entry with effects (after some without)
				g := rapid.IntRange(1, groups).Draw(rt, "group")
				index := applied[g] + uint64(rapid.IntRange(1, 3).Draw(rt, "gap"))
				var effects []statemachine.Effect
				before := slices.Clone(applied) // the journal an entry begins knows what came before it
				for range rapid.IntRange(1, 3).Draw(rt, "effects") {
					n := rapid.IntRange(1, nodes).Draw(rt, "node")
					task++
					kind := statemachine.EffAssignments
					if rapid.IntRange(0, 4).Draw(rt, "other") == 0 {
						kind = statemachine.EffServiceChanged // no node's
					} else {
						begin(n, before)
						model[n] = append(model[n], change{g, index, task})
					}
					effects = append(effects, statemachine.Effect{Kind: kind, Node: statemachine.NodeID(n), Task: task})
				}
				f.OnApply(g, index, effects)
				applied[g] = index
				if rapid.Bool().Draw(rt, "cursor") {
					cursors = append(cursors, slices.Clone(applied))
				}
			case 2: // a poll: node's changes past a cursor handed out before
				n := rapid.IntRange(1, nodes).Draw(rt, "poll node")
				c := rapid.SampledFrom(cursors).Draw(rt, "from")
				begin(n, applied) // a poll begins a journal that had none
				for g := 1; g <= groups; g++ {
					got, ok := f.nodeChanges(nil, statemachine.NodeID(n), g, c[g])
					if wantOK := c[g] >= known[n][g]; ok != wantOK {
						rt.Fatalf("node %d group %d from %d: answered=%v, want %v (the journal knows from %d)", n, g, c[g], ok, wantOK, known[n][g])
					}
					if !ok {
						continue
					}
					var want []change
					for _, ch := range model[n] {
						if ch.g == g && ch.index > c[g] {
							want = append(want, ch)
						}
					}
					if len(got) != len(want) {
						rt.Fatalf("node %d group %d from %d: %d changes, want %d", n, g, c[g], len(got), len(want))
					}
					for i, e := range got {
						if e.group() != g || e.index() != want[i].index || e.task != want[i].task {
							rt.Fatalf("node %d group %d from %d: change %d is (%d, %d, task %d), want %+v", n, g, c[g], i, e.group(), e.index(), e.task, want[i])
						}
					}
				}
			}
		}
	})
}
