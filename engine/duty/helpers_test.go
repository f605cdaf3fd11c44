package duty

import (
	"context"
	"testing"
	"time"

	"shoal/internal/clock"
	"shoal/statemachine"
)

// newFakeClock returns a fake clock at a fixed start.
func newFakeClock() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

// blockUntil waits until a loop on clk has n timers armed (it finished its
// work and waits again).
func blockUntil(t testing.TB, clk *clock.Fake, n int) {
	t.Helper()
	if err := clk.BlockUntil(n, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// newMem returns an in-memory cluster of groups service groups stamped by
// clk (a fresh fake clock if nil).
func newMem(_ testing.TB, groups int, clk *clock.Fake) *Memory {
	if clk == nil {
		clk = newFakeClock()
	}
	return NewMemory(groups, clk)
}

// settled checks a condition that must hold now: the in-memory cluster
// applies every submission before it returns, so nothing is waited for.
func settled(t testing.TB, cond func() (bool, string)) {
	t.Helper()
	if ok, what := cond(); !ok {
		t.Fatal(what)
	}
}

func tasksWhere(t testing.TB, e *Memory, match func(*statemachine.Task) bool) []*statemachine.Task {
	t.Helper()
	var out []*statemachine.Task
	for g := 1; g <= e.Groups(); g++ {
		err := e.Read(context.Background(), g, func(s *statemachine.State) {
			for _, id := range s.TaskIDs() {
				if tk := s.Task(id); match(tk) {
					c := *tk
					out = append(out, &c)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// assignPending assigns every pending task round-robin over nodes 1..nodes.
func assignPending(t testing.TB, e *Memory, nodes int) []statemachine.Command {
	var cmds []statemachine.Command
	for i, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StatePending }) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdAssign, Task: tk.ID, Node: statemachine.NodeID(i%nodes + 1)})
	}
	return cmds
}

// reports moves every live task that is below `to` (and at least assigned)
// to `to`, as its agent would report.
func reports(t testing.TB, e *Memory, to statemachine.TaskState) []statemachine.Command {
	var cmds []statemachine.Command
	live := func(tk *statemachine.Task) bool {
		return tk.Status.State >= statemachine.StateAssigned && tk.Status.State < to && !tk.Desired.Stopping()
	}
	for _, tk := range tasksWhere(t, e, live) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: tk.Node, State: to})
	}
	return cmds
}

// runDuty runs a duty's loop in a goroutine; stop cancels it and waits
// until it returned.
func runDuty(t testing.TB, run func(ctx context.Context)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func mustSubmit(t testing.TB, e *Memory, cmds ...statemachine.Command) {
	t.Helper()
	for i, o := range e.SubmitMany(context.Background(), cmds) {
		if err := o.Err(); err != nil {
			t.Fatalf("%s: %v", cmds[i].Kind, err)
		}
	}
}

// mustSubmitLocked applies cmds from inside a submission of e (a
// FailSubmissions hook runs under e's lock), routed like SubmitMany.
func mustSubmitLocked(t testing.TB, e *Memory, cmds ...statemachine.Command) {
	t.Helper()
	for _, c := range cmds {
		for g := 0; g <= e.Groups(); g++ {
			e.applyLocked(g, []statemachine.Command{c})
		}
	}
}
