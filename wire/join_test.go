package wire

import (
	"slices"
	"testing"
)

// The frames of one answer join into one message: every spec, task and
// removal in frame order, and the last frame's Last and Leader.
func TestAssignmentsJoin(t *testing.T) {
	a := &Assignments{Kind: FrameComplete, Specs: []Spec{{Service: "a"}}, Tasks: []Assignment{{Task: 1}}}
	a.Join(&Assignments{Kind: FrameComplete, Tasks: []Assignment{{Task: 2}}, Removed: nil})
	a.Join(&Assignments{Kind: FrameComplete, Specs: []Spec{{Service: "b"}}, Tasks: []Assignment{{Task: 3}}, Last: true, Leader: "m2:7700"})
	var ids []uint64
	for _, tk := range a.Tasks {
		ids = append(ids, uint64(tk.Task))
	}
	if !slices.Equal(ids, []uint64{1, 2, 3}) || len(a.Specs) != 2 || !a.Last || a.Leader != "m2:7700" {
		t.Fatalf("joined: tasks %v, %d specs, last %v, leader %q", ids, len(a.Specs), a.Last, a.Leader)
	}
}
