package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"shoal/statemachine"
)

// entryClock stamps entries with a manual clock's time but waits in real
// time, so the engine's back-off and WaitReady still move while the test
// holds the replicated time still.
type entryClock struct{ m *manualClock }

func (c entryClock) Now() time.Time { return c.m.Now() }

func (c entryClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// oneTask reads the task with id (linearizably); nil if it is gone.
func oneTask(t testing.TB, e *Engine, id statemachine.TaskID) *statemachine.Task {
	t.Helper()
	var tk *statemachine.Task
	err := e.Read(context.Background(), TaskGroup(id), func(s *statemachine.State) {
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

// waitDutyIdle waits until a duty on clk is waiting for its next interval.
func waitDutyIdle(t testing.TB, clk *manualClock) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) { return clk.waiters() == 1, "duty not waiting for its next interval" })
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

func TestTimerSubmitToGroupRefusesRoutedKinds(t *testing.T) {
	e := openOne(t, testConfig(2))
	ctx := context.Background()
	if _, err := e.SubmitToGroup(ctx, 3, statemachine.Command{Kind: statemachine.CmdTick}); err == nil {
		t.Fatal("tick to group 3 of 2 accepted")
	}
	if _, err := e.SubmitToGroup(ctx, 1, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 1})); err == nil {
		t.Fatal("create-service through SubmitToGroup accepted")
	}
	if _, err := e.SubmitToGroup(ctx, 2, statemachine.Command{Kind: statemachine.CmdTick}); err != nil {
		t.Fatal(err)
	}
}

// One replica, a manual clock: a failed task's replacement is held at
// desired ready for the 10s restart delay. Nothing else is proposed, so only
// the timer duty's tick can start it: not before the delay, and within one
// interval after it.
func TestTimerDutyPromotesDelayedRestart(t *testing.T) {
	clk := newManualClock()
	cfg := testConfig(1)
	cfg.Clock = entryClock{clk}
	e := openOne(t, cfg)
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
	group := TaskGroup(repl[0].ID)

	d := NewTimerDuty(e, TimerConfig{Clock: clk, Interval: time.Second})
	e.AddDuty(d)
	waitDutyIdle(t, clk)
	clk.Advance(5 * time.Second) // one run at 5s: nothing due yet
	waitDutyIdle(t, clk)
	if n := d.Ticks(); n != 0 {
		t.Fatalf("%d ticks before the restart delay passed", n)
	}
	if des := oneTask(t, e, repl[0].ID).Desired; des != statemachine.DesiredReady {
		t.Fatalf("replacement desired %s at 5s, want ready", des)
	}
	clk.Advance(6 * time.Second) // 11s: the delay has passed
	eventually(t, 10*time.Second, func() (bool, string) {
		des := oneTask(t, e, repl[0].ID).Desired
		return des == statemachine.DesiredRunning, fmt.Sprintf("replacement desired %s after 11s (ticks %d)", des, d.Ticks())
	})
	if n := d.Ticks(); n != 1 {
		t.Errorf("%d ticks, want 1", n)
	}
	waitDutyIdle(t, clk)
	var next int64
	if err := e.Read(context.Background(), group, func(s *statemachine.State) { next = s.NextDue() }); err != nil {
		t.Fatal(err)
	}
	if timerDue(next, clk.Now().UnixNano()) {
		t.Errorf("group %d still has a timer due (%d) after the tick", group, next)
	}
}
