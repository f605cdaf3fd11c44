package duty

import (
	"context"
	"slices"
	"testing"

	"shoal/statemachine"
)

// Each batch of a scan lists its pending tasks in ascending ID order
// (creation order: the oldest is placed first), each with its own status
// message and, for a global service, its own slot.
func TestScanBatchesListTasksInIDOrder(t *testing.T) {
	e := newMem(t, 1, nil)
	mustSubmit(t, e, zoneNodes(4)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 300, CPU: 1}))
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "mon", Mode: statemachine.ModeGlobal, CPU: 1}))
	for range 3 {
		sc := newScanner(0)
		ctx := context.Background()
		if err := e.Read(ctx, 0, sc.scanNodes); err != nil {
			t.Fatal(err)
		}
		if err := e.Read(ctx, 1, func(s *statemachine.State) { sc.scanGroup(1, s) }); err != nil {
			t.Fatal(err)
		}
		_, batches, stats := sc.result()
		if len(batches) != 2 || stats.Pending != 304 {
			t.Fatalf("%d batches with %d pending tasks, want 2 with 304", len(batches), stats.Pending)
		}
		err := e.Read(ctx, 1, func(s *statemachine.State) {
			for _, b := range batches {
				if !slices.IsSorted(b.tasks) {
					t.Fatalf("batch %s lists its tasks out of ID order", b.name)
				}
				for i, id := range b.tasks {
					tk := s.Task(id)
					if b.msgs[i] != tk.Message() || (b.global && b.slots[i] != tk.Slot) {
						t.Fatalf("batch %s: task %d listed with message %q slot %v, its own are %q slot %d",
							b.name, id, b.msgs[i], b.slots, tk.Message(), tk.Slot)
					}
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
