package engine

import (
	"bytes"
	"context"
	"testing"

	"shoal/route"
	"shoal/statemachine"
)

// SubmitStatuses writes the entries SubmitMany writes for the same
// reports as CmdTaskStatus commands, and answers each the same.
func TestSubmitStatusesIsSubmitMany(t *testing.T) {
	const node = 4
	tasks := []statemachine.TaskID{1<<48 | 7, 2<<48 | 8, 9<<48 | 1, 1<<48 | 9} // no group 9
	states := []statemachine.TaskState{statemachine.StateRunning, statemachine.StateFailed, statemachine.StateRunning, statemachine.StateComplete}
	exits := []int32{0, 137, 0, 0}
	msgs := []string{"", "oom", "", "done"}
	entries := twoGroupEntries
	ctx := context.Background()
	wantEnts, wantOut := entries(func(e *Engine) []route.Outcome {
		cmds := make([]statemachine.Command, len(tasks))
		for i := range cmds {
			cmds[i] = statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tasks[i], Node: node,
				State: states[i], ExitCode: exits[i], Message: msgs[i]}
		}
		return e.SubmitMany(ctx, cmds)
	})
	gotEnts, gotOut := entries(func(e *Engine) []route.Outcome {
		return e.SubmitStatuses(ctx, node, len(tasks), func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string) {
			return tasks[i], states[i], exits[i], msgs[i]
		})
	})
	for g := 1; g <= 2; g++ {
		if !bytes.Equal(gotEnts[g], wantEnts[g]) {
			t.Fatalf("group %d entry:\n%x\nwant\n%x", g, gotEnts[g], wantEnts[g])
		}
	}
	for i := range wantOut {
		if gotOut[i] != wantOut[i] {
			t.Fatalf("report %d: %+v, want %+v", i, gotOut[i], wantOut[i])
		}
	}
	if wantOut[2].Result.Code != statemachine.CodeNotFound || wantOut[3].Result.ID != 11 {
		t.Fatalf("outcomes %+v", wantOut)
	}
}
