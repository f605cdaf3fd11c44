package duty

import (
	"slices"
	"testing"

	"shoal/statemachine"
)

// The pending list is appended to as records become pending and compacted
// at each run: what a run reads is exactly the tasks whose record says
// pending, ascending and without duplicates, whatever the order they came
// in (a group's tasks become pending as their addresses are allocated, not
// always in ID order) and however often one left and came back.
func TestPendingListIsThePendingRecordsInOrder(t *testing.T) {
	gr := groupRecords{chunks: make(map[uint64]*recChunk), sorted: true}
	pend := func(ids ...statemachine.TaskID) {
		for _, id := range ids {
			gr.set(id, record{key: 1})
			gr.addPending(id)
		}
	}
	pend(5000, 3, 9, 2048)
	gr.set(9, record{node: 1, key: 1, res: 1}) // placed
	gr.del(2048)                               // removed
	pend(2048, 7)                              // back, and one more below the last
	want := []statemachine.TaskID{3, 7, 2048, 5000}
	if got := gr.compact(); !slices.Equal(got, want) {
		t.Fatalf("compact = %v, want %v", got, want)
	}
	if got := gr.compact(); !slices.Equal(got, want) {
		t.Fatalf("compact again = %v, want %v", got, want)
	}
	pend(6000)
	if !gr.sorted {
		t.Fatal("an ascending append unsorted the list")
	}

	// A burst leaves no large array behind once it is placed.
	for id := statemachine.TaskID(10_000); id < 30_000; id++ {
		pend(id)
	}
	for id := statemachine.TaskID(10_000); id < 30_000; id++ {
		gr.set(id, record{node: 1, key: 1, res: 1})
	}
	if got := gr.compact(); len(got) != 5 || cap(got) > 1<<12 {
		t.Fatalf("after the burst: %d pending in an array of %d", len(got), cap(got))
	}
}
