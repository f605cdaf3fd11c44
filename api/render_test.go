package api

import (
	"testing"

	"shoal/api/client"
	"shoal/statemachine"
)

// A service's rendering counts its running tasks twice: Running at the
// current spec version only (what convergence compares with Desired), and
// RunningAny at any version, so a rolling update's old tasks still serving
// show.
func TestRenderServiceCountsRunningOfAnyVersion(t *testing.T) {
	st, apply := stateApplier(t)
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
	if cv := renderService(1, st, st.ServiceByName("web")).Convergence; cv.State != client.Converged {
		t.Fatalf("before the update: convergence %+v, want converged", cv)
	}
	spec.Image = "v2"
	apply(statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
	// Slot 1's old task is being stopped; slots 2 and 3 still serve v1.
	if r, a, d, u := render(); r != 0 || a != 2 || d != 3 || u != "updating" {
		t.Fatalf("update started: running %d, running_any %d, desired %d, update %q; want 0, 2, 3, updating", r, a, d, u)
	}
	if cv := renderService(1, st, st.ServiceByName("web")).Convergence; cv.State != client.Converging {
		t.Fatalf("update started: convergence %+v, want converging", cv)
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

// A service's convergence, as the CLI's `service create/update/scale`
// waits on it: an update in flight converges only once it ends, a paused
// one is settled but not converged. (Which ended tasks settle a slot is the
// state's Settled, tested with real tasks in statemachine and below.)
func TestRenderServiceConvergence(t *testing.T) {
	type counts struct{ running, runningAny, complete, failed, rejected int }
	for _, c := range []struct {
		name    string
		update  statemachine.UpdateState
		cond    statemachine.RestartCondition
		desired int
		counts  counts
		want    client.Convergence
	}{
		{"all running", statemachine.UpdateNone, statemachine.RestartAny, 3, counts{running: 3, runningAny: 3},
			client.Convergence{State: client.Converged}},
		{"one short", statemachine.UpdateCompleted, statemachine.RestartAny, 3, counts{running: 2, runningAny: 2},
			client.Convergence{State: client.Converging, Why: "2/3 running at v2"}},
		{"update in flight, counts reached", statemachine.Updating, statemachine.RestartAny, 3, counts{running: 3, runningAny: 3},
			client.Convergence{State: client.Converging, Why: "the update to v2 is under way: 3/3 running at v2, 3 of any version"}},
		{"rollback in flight", statemachine.RollbackStarted, statemachine.RestartAny, 3, counts{running: 1, runningAny: 3},
			client.Convergence{State: client.Converging, Why: "the rollback to v2 is under way: 1/3 running at v2, 3 of any version"}},
		{"update paused", statemachine.UpdatePaused, statemachine.RestartAny, 3, counts{running: 0, runningAny: 2},
			client.Convergence{State: client.UpdatePaused, Why: "the update of web paused with 2/3 running, 0 at v2: update paused due to failure of task 4 (failed)"}},
		{"rollback paused", statemachine.RollbackPaused, statemachine.RestartAny, 3, counts{running: 3, runningAny: 3},
			client.Convergence{State: client.UpdatePaused, Why: "the update of web paused with 3/3 running, 3 at v2: update paused due to failure of task 4 (failed)"}},
		{"completed, restart any", statemachine.UpdateNone, statemachine.RestartAny, 2, counts{running: 1, runningAny: 1, complete: 1},
			client.Convergence{State: client.Converging, Why: "1/2 running at v2"}},
		{"removed", statemachine.UpdateNone, statemachine.RestartAny, 0, counts{},
			client.Convergence{State: client.Converged}},
	} {
		svc := &statemachine.Service{SpecVersion: 2}
		svc.Spec.Name, svc.Spec.Restart.Condition = "web", c.cond
		svc.Update = statemachine.UpdateStatus{State: c.update, Message: "update paused due to failure of task 4 (failed)"}
		var n statemachine.ServiceCounts
		n.Running, n.RunningAny = c.counts.running, c.counts.runningAny
		n.ByState[statemachine.StateRunning] = c.counts.runningAny
		n.ByState[statemachine.StateComplete] = c.counts.complete
		n.ByState[statemachine.StateFailed] = c.counts.failed
		n.ByState[statemachine.StateRejected] = c.counts.rejected
		if got := convergence(statemachine.New(statemachine.Config{}), svc, n, c.desired); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// stateApplier returns an empty state and a function that applies
// commands to it as the next entry (a millisecond after the last),
// failing the test on any refusal.
func stateApplier(t *testing.T) (*statemachine.State, func(...statemachine.Command)) {
	st := statemachine.New(statemachine.Config{})
	var out statemachine.Output
	index, now := uint64(0), int64(1_700_000_000e9)
	return st, func(cmds ...statemachine.Command) {
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
}

// Tasks of an older spec version that ended for good do not settle the
// current version: after an update of a one-shot service (restart
// on-failure) whose v1 tasks completed, the service has converged only
// once v2's tasks have ended too.
func TestConvergenceCountsOnlyTheCurrentVersionsEndedTasks(t *testing.T) {
	st, apply := stateApplier(t)
	apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 1, Name: "n1", CPU: 4000, Memory: 1 << 33}})
	spec := statemachine.ServiceSpec{Name: "job", Replicas: 2, Image: "v1", Update: statemachine.UpdateConfig{Parallelism: 2},
		Restart: statemachine.RestartPolicy{Condition: statemachine.RestartOnFailure}}
	apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &spec})
	finish := func(v uint32, states ...statemachine.TaskState) {
		t.Helper()
		for _, id := range st.TaskIDs() {
			if tk := st.Task(id); tk.SpecVersion == v && tk.Status.State == statemachine.StatePending && tk.Desired == statemachine.DesiredRunning {
				apply(statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: 1})
				for _, s := range states {
					apply(statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: 1, State: s})
				}
			}
		}
	}
	conv := func() client.Convergence { return renderService(1, st, st.ServiceByName("job")).Convergence }
	finish(1, statemachine.StateRunning, statemachine.StateComplete)
	if cv := conv(); cv.State != client.Converged {
		t.Fatalf("v1 completed: %+v, want converged", cv)
	}
	spec.Image = "v2"
	apply(statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
	for range 3 {
		if cv := conv(); cv.State == client.Converged {
			t.Fatalf("v2's tasks not run yet (update %s, tasks %v): %+v, want not converged",
				st.ServiceByName("job").Update.State, renderService(1, st, st.ServiceByName("job")).Tasks, cv)
		}
		finish(1) // nothing left at v1: v2's tasks stay pending
	}
	finish(2, statemachine.StateRunning)
	finish(2)
	for _, id := range st.TaskIDs() {
		if tk := st.Task(id); tk.SpecVersion == 2 && tk.Status.State == statemachine.StateRunning {
			apply(statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: 1, State: statemachine.StateComplete})
		}
	}
	if cv := conv(); cv.State != client.Converged {
		t.Fatalf("v2 completed: %+v, want converged", cv)
	}
}
