package statemachine

import "testing"

// A slot settles at the current spec version when its task runs there, or
// when its newest task ended there and the restart condition (or the
// attempts left) leaves it ended; failed counts the settled ones that
// failed or were rejected.
func TestSettledCountsSlotsEndedForGood(t *testing.T) {
	for _, c := range []struct {
		name                  string
		cond                  RestartCondition
		attempts              uint32
		ends                  []TaskState // one per slot; StateRunning leaves it running
		wantSettled, wantFail int
	}{
		{"restart any, one completed", RestartAny, 0, []TaskState{StateRunning, StateComplete}, 1, 0},
		{"on-failure, one completed", RestartOnFailure, 0, []TaskState{StateRunning, StateComplete}, 2, 0},
		{"on-failure, one failed", RestartOnFailure, 0, []TaskState{StateRunning, StateFailed}, 1, 0},
		{"none, failed and rejected", RestartNone, 0, []TaskState{StateRunning, StateFailed, StateRejected}, 3, 2},
		{"any, attempts used up", RestartAny, 1, []TaskState{StateRunning, StateFailed}, 2, 1},
	} {
		st := New(Config{})
		var out Output
		index, now := uint64(0), int64(1_700_000_000e9)
		apply := func(cmds ...Command) {
			t.Helper()
			index++
			now += 1e6
			st.Apply(cmds, index, now, &out)
			for i, r := range out.Results {
				if err := r.Err(); err != nil {
					t.Fatalf("%s: %s: %v", c.name, cmds[i].Kind, err)
				}
			}
		}
		apply(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 1, Name: "n1", CPU: 4000, Memory: 1 << 33}})
		spec := ServiceSpec{Name: "job", Replicas: uint32(len(c.ends)), Image: "v1",
			Restart: RestartPolicy{Condition: c.cond, MaxAttempts: c.attempts}}
		apply(Command{Kind: CmdCreateService, Spec: &spec})
		svc := st.ServiceByName("job")
		// Every slot's first task runs; then each ends as the case says,
		// and a replacement the restart condition makes is left pending.
		for i, id := range st.TaskIDs() {
			apply(Command{Kind: CmdAssign, Task: id, Node: 1})
			if c.ends[i] != StateRejected { // a task is rejected before it runs
				apply(Command{Kind: CmdTaskStatus, Task: id, Node: 1, State: StateRunning})
			}
			if e := c.ends[i]; e != StateRunning {
				apply(Command{Kind: CmdTaskStatus, Task: id, Node: 1, State: e})
			}
		}
		if c.attempts > 0 {
			// The attempt the failure used: the replacement fails too.
			for _, id := range st.TaskIDs() {
				if tk := st.Task(id); tk.Status.State == StatePending && tk.Desired == DesiredRunning {
					apply(Command{Kind: CmdAssign, Task: id, Node: 1})
					apply(Command{Kind: CmdTaskStatus, Task: id, Node: 1, State: StateFailed})
				}
			}
		}
		s, f := st.Settled(svc.ID)
		if s != c.wantSettled || f != c.wantFail {
			t.Errorf("%s: settled %d, failed %d; want %d, %d", c.name, s, f, c.wantSettled, c.wantFail)
		}
	}
}
