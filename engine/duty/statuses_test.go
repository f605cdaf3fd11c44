package duty

import (
	"context"
	"reflect"
	"testing"

	"shoal/route"
	"shoal/statemachine"
)

// statusing is a Memory that takes status reports without commands, as
// the engine does, counting what it was handed.
type statusing struct {
	*Memory
	reports int
}

func (s *statusing) SubmitStatuses(ctx context.Context, node statemachine.NodeID, n int,
	at func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string)) []route.Outcome {
	s.reports += n
	return NewSubmitter(s.Memory, nil).SubmitStatuses(ctx, node, n, at) // as commands
}

// A Submitter over a cluster that takes status reports as they are hands
// them so; either way each report is the CmdTaskStatus of its fields, and
// is answered the same.
func TestSubmitterHandsStatusesAsTheyAre(t *testing.T) {
	setup := func(e *Memory) []*statemachine.Task {
		mustSubmit(t, e, zoneNodes(2)...)
		mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 4}))
		if got := runOnce(t, NewDriver(e, DriverConfig{})); got != 4 {
			t.Fatalf("placed %d, want 4", got)
		}
		return tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Node == 1 })
	}
	report := func(e *Memory, sub *Submitter) ([]route.Outcome, []statemachine.TaskStatus) {
		tasks := setup(e)
		tasks = append(tasks, &statemachine.Task{ID: 1<<48 | 999}) // no such task
		outs := sub.SubmitStatuses(context.Background(), 1, len(tasks), func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string) {
			if i%2 == 1 {
				return tasks[i].ID, statemachine.StateFailed, 3, "exit code 3"
			}
			return tasks[i].ID, statemachine.StateRunning, 0, ""
		})
		var st []statemachine.TaskStatus
		for _, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Node == 1 }) {
			st = append(st, tk.Status)
		}
		return outs, st
	}
	plain := newMem(t, 2, nil)
	wantOuts, wantSt := report(plain, NewSubmitter(plain, nil))
	s := &statusing{Memory: newMem(t, 2, nil)}
	gotOuts, gotSt := report(s.Memory, NewSubmitter(s, nil))
	if s.reports != len(wantOuts) {
		t.Fatalf("handed %d reports as they are, want %d", s.reports, len(wantOuts))
	}
	if !reflect.DeepEqual(gotOuts, wantOuts) || !reflect.DeepEqual(gotSt, wantSt) {
		t.Fatalf("as reports:\n%+v\n%+v\nas commands:\n%+v\n%+v", gotOuts, gotSt, wantOuts, wantSt)
	}
	if last := wantOuts[len(wantOuts)-1]; last.Result.Code != statemachine.CodeNotFound {
		t.Fatalf("a report of no task: %+v, want not found", last)
	}
	var failed int
	for _, st := range wantSt {
		if st.State == statemachine.StateFailed && st.ExitCode == 3 {
			failed++
		}
	}
	if len(wantSt) < 2 || failed == 0 {
		t.Fatalf("node 1's tasks after the reports: %+v", wantSt)
	}
}
