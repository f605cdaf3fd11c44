package duty

import (
	"context"
	"maps"
	"testing"

	"shoal/route"
	"shoal/statemachine"
)

// assigning is a Memory that takes assignments without commands, as the
// engine does, counting what it was handed.
type assigning struct {
	*Memory
	assigns int
}

func (a *assigning) SubmitAssigns(ctx context.Context, n int, at func(i int) (statemachine.TaskID, statemachine.NodeID)) []route.Outcome {
	a.assigns += n
	return submitAssigns(ctx, a.Memory, n, at)
}

// A driver over a cluster that takes assignments as they are (through a
// Submitter, as manager.Start wires it) hands them so, and places what a
// driver over commands places.
func TestDriverHandsAssignmentsAsTheyAre(t *testing.T) {
	setup := func(e *Memory) {
		mustSubmit(t, e, zoneNodes(6)...)
		mustSubmit(t, e,
			createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 12, CPU: 100, Memory: 64 << 20}),
			createSpec(statemachine.ServiceSpec{Name: "db", Replicas: 3, Constraints: []string{"node.labels.zone==b"}}),
			createSpec(statemachine.ServiceSpec{Name: "mon", Mode: statemachine.ModeGlobal, CPU: 50}))
	}
	plain := newMem(t, 3, nil)
	setup(plain)
	if got := runOnce(t, NewDriver(plain, DriverConfig{})); got != 21 {
		t.Fatalf("over commands: placed %d, want 21", got)
	}
	a := &assigning{Memory: newMem(t, 3, nil)}
	setup(a.Memory)
	if got := runOnce(t, NewDriver(NewSubmitter(a, nil), DriverConfig{})); got != 21 || a.assigns != 21 {
		t.Fatalf("over assignments: placed %d, handed %d as assignments; want 21 and 21", got, a.assigns)
	}
	want, got := placement(t, plain), placement(t, a.Memory)
	if !maps.EqualFunc(want, got, func(x, y map[statemachine.NodeID]int) bool { return maps.Equal(x, y) }) {
		t.Fatalf("placements differ:\ncommands    %v\nassignments %v", want, got)
	}
}
