package duty

import (
	"context"
	"fmt"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// oneTask reads the task with id (linearizably); nil if it is gone.
func oneTask(t testing.TB, e *Memory, id statemachine.TaskID) *statemachine.Task {
	t.Helper()
	var tk *statemachine.Task
	err := e.Read(context.Background(), route.TaskGroup(id), func(s *statemachine.State) {
		if x := s.Task(id); x != nil {
			c := *x
			tk = &c
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestTimerDue(t *testing.T) {
	for _, c := range []struct {
		next, now int64
		want      bool
	}{{0, 5, false}, {6, 5, false}, {5, 5, true}, {4, 5, true}} {
		if got := timerDue(c.next, c.now); got != c.want {
			t.Errorf("timerDue(%d, %d) = %t, want %t", c.next, c.now, got, c.want)
		}
	}
}

// The in-memory cluster, a fake clock: a failed task's replacement is held at
// desired ready for the 10s restart delay. Nothing else is proposed, so only
// the timer duty's tick can start it: not before the delay, and within one
// interval after it.
func TestTimerDutyPromotesDelayedRestart(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	mustSubmit(t, e, zoneNodes(1)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 1,
		Restart: statemachine.RestartPolicy{Delay: int64(10 * time.Second)}}))
	mustSubmit(t, e, assignPending(t, e, 1)...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)
	orig := tasksWhere(t, e, func(*statemachine.Task) bool { return true })
	if len(orig) != 1 {
		t.Fatalf("%d tasks, want 1", len(orig))
	}
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: orig[0].ID, Node: 1,
		State: statemachine.StateFailed, ExitCode: 1})
	repl := tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.ID != orig[0].ID })
	if len(repl) != 1 || repl[0].Desired != statemachine.DesiredReady {
		t.Fatalf("replacements %+v, want one held at desired ready", repl)
	}
	if st := oneTask(t, e, orig[0].ID).Status.State; !st.Terminal() {
		t.Fatalf("original is %s, want terminal", st)
	}
	group := route.TaskGroup(repl[0].ID)

	d := NewTimerDuty(e, TimerConfig{Clock: clk, Interval: time.Second})
	stop := runDuty(t, d.Run)
	defer stop()
	blockUntil(t, clk, 1)
	clk.Advance(5 * time.Second) // one run at 5s: nothing due yet
	blockUntil(t, clk, 1)
	if n := d.Ticks(); n != 0 {
		t.Fatalf("%d ticks before the restart delay passed", n)
	}
	if des := oneTask(t, e, repl[0].ID).Desired; des != statemachine.DesiredReady {
		t.Fatalf("replacement desired %s at 5s, want ready", des)
	}
	clk.Advance(6 * time.Second) // 11s: the delay has passed
	blockUntil(t, clk, 1)
	settled(t, func() (bool, string) {
		des := oneTask(t, e, repl[0].ID).Desired
		return des == statemachine.DesiredRunning, fmt.Sprintf("replacement desired %s after 11s (ticks %d)", des, d.Ticks())
	})
	if n := d.Ticks(); n != 1 {
		t.Errorf("%d ticks, want 1", n)
	}
	var next int64
	if err := e.Read(context.Background(), group, func(s *statemachine.State) { next = s.NextDue() }); err != nil {
		t.Fatal(err)
	}
	if timerDue(next, clk.Now().UnixNano()) {
		t.Errorf("group %d still has a timer due (%d) after the tick", group, next)
	}
}
