package agent

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"shoal/internal/clock"
	sm "shoal/statemachine"
)

func simRun(id sm.TaskID) *TaskRun { return &TaskRun{Task: id, Service: "web", Spec: &webSpec} }

func TestSimStages(t *testing.T) {
	clk := clock.NewFake(t0)
	cfg := SimConfig{Seed: 42,
		Prepare: SimStage{Delay: time.Second, Jitter: time.Second},
		Start:   SimStage{Outcomes: []SimOutcome{{Weight: 1, Reject: "no such image"}, {Weight: 3}}},
		Run:     SimStage{Delay: 10 * time.Second, Outcomes: []SimOutcome{{Weight: 1, ExitCode: 0}, {Weight: 1, ExitCode: 3}}},
		Stop:    SimStage{Delay: 500 * time.Millisecond}}
	e := NewSimExecutor(clk, cfg)
	defer e.Close()
	e.Do(Action{Op: OpPrepare, Task: 1, Run: simRun(1)})
	if err := clk.BlockUntil(1, waitLimit); err != nil {
		t.Fatal(err)
	}
	d, _ := e.roll(1, stagePrepare, &cfg.Prepare)
	if d < time.Second || d >= 2*time.Second {
		t.Fatalf("prepare takes %v, want within [1s, 2s)", d)
	}
	clk.Advance(d - time.Nanosecond)
	select {
	case ev := <-e.Events():
		t.Fatalf("event before the stage delay: %+v", ev)
	default:
	}
	clk.Advance(time.Nanosecond)
	expectObs(t, e, 1, ObsPrepared)

	// Outcomes are a function of (seed, task, stage): over many tasks the
	// weights show, and a second executor with the same seed agrees.
	twin := NewSimExecutor(clk, cfg)
	defer twin.Close()
	rejected := 0
	for id := sm.TaskID(1); id <= 1000; id++ {
		_, o := e.roll(id, stageStart, &cfg.Start)
		_, o2 := twin.roll(id, stageStart, &cfg.Start)
		if o != o2 {
			t.Fatalf("task %d: outcome %+v, twin %+v", id, o, o2)
		}
		if o.Reject != "" {
			rejected++
		}
	}
	if rejected < 200 || rejected > 300 {
		t.Fatalf("%d of 1000 starts rejected, want about 250", rejected)
	}

	// A task that starts runs 10s, then exits with its rolled code.
	var id sm.TaskID
	for id = 2; ; id++ {
		if _, o := e.roll(id, stageStart, &cfg.Start); o.Reject == "" {
			break
		}
	}
	e.Do(Action{Op: OpStart, Task: id, Run: simRun(id)})
	expectObs(t, e, id, ObsStarted)
	_, o := e.roll(id, stageRun, &cfg.Run)
	clk.Advance(10 * time.Second)
	if obs := expectObs(t, e, id, ObsExited); obs.ExitCode != o.ExitCode {
		t.Fatalf("exit %d, rolled %d", obs.ExitCode, o.ExitCode)
	}
}

func TestSimReopenAttachSweep(t *testing.T) {
	clk := clock.NewFake(t0)
	e := NewSimExecutor(clk, SimConfig{})
	for id := sm.TaskID(1); id <= 3; id++ {
		e.Do(Action{Op: OpStart, Task: id, Run: simRun(id)})
	}
	handles := map[sm.TaskID]Handle{}
	for range 3 {
		ev := nextEvent(t, e)
		handles[ev.Task] = ev.Obs.Handle
	}
	r := e.Reopen()
	defer r.Close()
	r.Do(Action{Op: OpAttach, Task: 1, Handle: handles[1]})
	if obs := expectObs(t, r, 1, ObsStarted); obs.Handle != handles[1] {
		t.Fatalf("attached %+v", obs.Handle)
	}
	r.Do(Action{Op: OpAttach, Task: 2, Handle: Handle{Pid: 1}})
	expectObs(t, r, 2, ObsLost)
	r.Sweep()
	if r.Running() != 1 {
		t.Fatalf("%d processes after the sweep, want 1", r.Running())
	}
	r.Do(Action{Op: OpStop, Task: 1})
	expectObs(t, r, 1, ObsExited)
	if r.Running() != 0 {
		t.Fatal("stopped process still runs")
	}
}

// An agent's simulated operations in progress share one timer, set to the
// earliest; they end in deadline order, and one forgotten never ends.
func TestSimOperationsShareATimer(t *testing.T) {
	clk := clock.NewFake(t0)
	cfg := SimConfig{Seed: 7, Prepare: SimStage{Delay: time.Second, Jitter: time.Second}}
	e := NewSimExecutor(clk, cfg)
	defer e.Close()
	ids := []sm.TaskID{1, 2, 3, 4, 5}
	for _, id := range ids {
		e.Do(Action{Op: OpPrepare, Task: id, Run: simRun(id)})
	}
	if n := clk.Waiters(); n != 1 {
		t.Fatalf("%d timers for %d operations in progress, want 1", n, len(ids))
	}
	e.Do(Action{Op: OpForget, Task: 3})
	e.world.mu.Lock()
	left := len(e.world.due)
	e.world.mu.Unlock()
	if left != len(ids)-1 {
		t.Fatalf("%d operations in progress after a forget, want %d", left, len(ids)-1)
	}
	var want []sm.TaskID
	for _, id := range ids {
		if id != 3 {
			want = append(want, id)
		}
	}
	slices.SortFunc(want, func(a, b sm.TaskID) int {
		da, _ := e.roll(a, stagePrepare, &cfg.Prepare)
		db, _ := e.roll(b, stagePrepare, &cfg.Prepare)
		return cmp.Compare(da, db)
	})
	clk.Advance(2 * time.Second) // past every deadline
	for _, id := range want {
		expectObs(t, e, id, ObsPrepared)
	}
	e.world.mu.Lock()
	defer e.world.mu.Unlock()
	if len(e.world.due) != 0 || len(e.world.pending) != 0 {
		t.Fatalf("operations still in progress: %d due, %d pending", len(e.world.due), len(e.world.pending))
	}
}
