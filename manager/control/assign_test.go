package control

import (
	"slices"
	"testing"

	"shoal/statemachine"
	"shoal/wire"
)

// The agent is sent the spec the scheduler reserves resources of
// (Service.SpecAt), also for a task two versions behind, whose own spec
// the state no longer keeps: the current one, not the one before it.
func TestAgentIsSentTheSpecTheSchedulerReserves(t *testing.T) {
	st, apply := stateApplier(t)
	apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 1, Name: "n1", CPU: 4000, Memory: 1 << 33}})
	spec := statemachine.ServiceSpec{Name: "web", Replicas: 1, Command: []string{"v1"}, CPU: 100}
	apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &spec})
	id := st.TaskIDs()[0]
	apply(statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: 1})
	apply(statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: 1, State: statemachine.StateRunning})
	for _, v := range []string{"v2", "v3"} {
		spec.Command, spec.CPU = []string{v}, spec.CPU*2
		apply(statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
	}
	svc, task := st.ServiceByName("web"), st.Task(id)
	if svc.SpecVersion != 3 || task.SpecVersion != 1 {
		t.Fatalf("service at v%d, task at v%d; want v3 and v1", svc.SpecVersion, task.SpecVersion)
	}
	reserved, kept := svc.SpecAt(task.SpecVersion)
	if kept || reserved.CPU != 400 {
		t.Fatalf("SpecAt(1) = cpu %d, kept %v; want the current spec (cpu 400), not kept", reserved.CPU, kept)
	}
	ss := &session{}
	var a wire.Assignments
	addSpec(ss, st, task, &a)
	if len(a.Specs) != 1 || a.Specs[0].Version != 1 || !slices.Equal(a.Specs[0].Command, reserved.Command) {
		t.Fatalf("agent is sent %+v; want version 1 with command %q, the spec the scheduler reserves", a.Specs, reserved.Command)
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
