package api

import (
	"testing"

	"shoal/statemachine"
)

// A service's rendering counts its running tasks twice: Running at the
// current spec version only (what convergence compares with Desired), and
// RunningAny at any version, so a rolling update's old tasks still serving
// show.
func TestRenderServiceCountsRunningOfAnyVersion(t *testing.T) {
	st := statemachine.New(statemachine.Config{})
	var out statemachine.Output
	index, now := uint64(0), int64(1_700_000_000e9)
	apply := func(cmds ...statemachine.Command) {
		t.Helper()
		index++
		now += 1e6
		st.Apply(cmds, index, now, &out)
		for i, r := range out.Results {
			if err := r.Err(); err != nil {
				t.Fatalf("%s: %v", cmds[i].Kind, err)
			}
		}
	}
	apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 1, Name: "n1", CPU: 4000, Memory: 1 << 33}})
	spec := statemachine.ServiceSpec{Name: "web", Replicas: 3, Image: "v1", Update: statemachine.UpdateConfig{Parallelism: 1}}
	apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &spec})
	runAll := func() {
		t.Helper()
		for _, id := range st.TaskIDs() {
			if tk := st.Task(id); tk.Status.State == statemachine.StatePending && tk.Desired == statemachine.DesiredRunning {
				apply(statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: 1})
				apply(statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: 1, State: statemachine.StateRunning})
			}
		}
	}
	runAll()
	render := func() (running, any, desired int, update string) {
		svc := st.ServiceByName("web")
		r := renderService(1, st, svc)
		return r.Running, r.RunningAny, r.Desired, r.Update.State
	}
	if r, a, d, u := render(); r != 3 || a != 3 || d != 3 || u != "" {
		t.Fatalf("before the update: running %d, running_any %d, desired %d, update %q; want 3, 3, 3, none", r, a, d, u)
	}
	spec.Image = "v2"
	apply(statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
	// Slot 1's old task is being stopped; slots 2 and 3 still serve v1.
	if r, a, d, u := render(); r != 0 || a != 2 || d != 3 || u != "updating" {
		t.Fatalf("update started: running %d, running_any %d, desired %d, update %q; want 0, 2, 3, updating", r, a, d, u)
	}
	for _, id := range st.TaskIDs() {
		if tk := st.Task(id); tk.SpecVersion == 1 && tk.Desired.Stopping() {
			apply(statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: 1, State: statemachine.StateShutdown})
		}
	}
	runAll()
	// Slot 1 runs v2, so slot 2's old task is being stopped (no update
	// delay); slot 3 still serves v1.
	if r, a, d, _ := render(); r != 1 || a != 2 || d != 3 {
		t.Fatalf("slot 1 moved: running %d, running_any %d, desired %d; want 1, 2, 3", r, a, d)
	}
}
