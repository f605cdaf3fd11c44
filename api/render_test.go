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
// one is settled but not converged, and tasks that ended for good count as
// settled only where the restart condition leaves them ended.
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
		{"completed, restart on-failure", statemachine.UpdateNone, statemachine.RestartOnFailure, 2, counts{running: 1, runningAny: 1, complete: 1},
			client.Convergence{State: client.Converged}},
		{"failed, restart on-failure", statemachine.UpdateNone, statemachine.RestartOnFailure, 2, counts{running: 1, runningAny: 1, failed: 1},
			client.Convergence{State: client.Converging, Why: "1/2 running at v2"}},
		{"failed for good, restart none", statemachine.UpdateNone, statemachine.RestartNone, 3, counts{running: 1, complete: 0, failed: 1, rejected: 1},
			client.Convergence{State: client.Converged, Failed: 2, Why: "2 task(s) of web failed and will not be restarted (restart condition none)"}},
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
		if got := convergence(svc, n, c.desired); got != c.want {
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
