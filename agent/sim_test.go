package agent

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

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

// The simulated executor on a clock against a model: tasks prepared,
// started, stopped and forgotten at random while time passes; each
// operation not forgotten ends once, at its rolled deadline, with its
// rolled outcome, and a forgotten one never ends. The executor keeps its
// operations for reuse once they ended or were cancelled: an operation
// reused while still pending, or ended with another's stage, breaks it.
func TestSimOperationsMatchAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := clock.NewFake(t0)
		cfg := SimConfig{Seed: rapid.Uint64().Draw(t, "seed"),
			Prepare: SimStage{Delay: 100 * time.Millisecond, Jitter: time.Second, Outcomes: []SimOutcome{{Weight: 1, Reject: "no image"}, {Weight: 3}}},
			Start:   SimStage{Delay: 100 * time.Millisecond, Jitter: time.Second, Outcomes: []SimOutcome{{Weight: 1, Reject: "no port"}, {Weight: 3}}},
			Stop:    SimStage{Delay: 100 * time.Millisecond, Jitter: 500 * time.Millisecond}}
		e := NewSimExecutor(clk, cfg)
		defer e.Close()
		type pend struct {
			stage int
			at    time.Time
			want  ObsKind
		}
		pending := map[sm.TaskID]pend{}
		running := map[sm.TaskID]bool{}
		next := func() Event {
			select {
			case ev := <-e.Events():
				return ev
			case <-time.After(2 * time.Second): // they come at once: a goroutine's hand-over
				t.Fatalf("no executor event within 2s")
				return Event{}
			}
		}
		const tasks = 6
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			id := sm.TaskID(rapid.IntRange(1, tasks).Draw(t, fmt.Sprint("task", step)))
			_, busy := pending[id]
			switch rapid.IntRange(0, 4).Draw(t, fmt.Sprint("what", step)) {
			case 0: // prepare
				if busy || running[id] {
					continue
				}
				d, o := e.roll(id, stagePrepare, &cfg.Prepare)
				want := ObsPrepared
				if o.Reject != "" {
					want = ObsRejected
				}
				pending[id] = pend{stagePrepare, clk.Now().Add(d), want}
				e.Do(Action{Op: OpPrepare, Task: id, Run: simRun(id)})
			case 1: // start
				if busy || running[id] {
					continue
				}
				d, o := e.roll(id, stageStart, &cfg.Start)
				want := ObsStarted
				if o.Reject != "" {
					want = ObsRejected
				}
				pending[id] = pend{stageStart, clk.Now().Add(d), want}
				e.Do(Action{Op: OpStart, Task: id, Run: simRun(id)})
			case 2: // stop
				if busy || !running[id] {
					continue
				}
				d, _ := e.roll(id, stageStop, &cfg.Stop)
				pending[id] = pend{stageStop, clk.Now().Add(d), ObsExited}
				e.Do(Action{Op: OpStop, Task: id})
			case 3: // forget
				delete(pending, id)
				delete(running, id)
				e.Do(Action{Op: OpForget, Task: id})
			case 4: // time passes
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(1500*time.Millisecond)).Draw(t, fmt.Sprint("advance", step))))
				now := clk.Now()
				var want []string
				for id, p := range pending {
					if !p.at.After(now) {
						want = append(want, fmt.Sprintf("%d %v", id, p.want))
						delete(pending, id)
						switch {
						case p.want == ObsStarted:
							running[id] = true
						case p.want == ObsExited:
							delete(running, id)
						}
					}
				}
				var got []string
				for range want {
					ev := next()
					got = append(got, fmt.Sprintf("%d %v", ev.Task, ev.Obs.Kind))
				}
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("at %v the executor observed %v, want %v", now.Sub(t0), got, want)
				}
			}
		}
		clk.Advance(time.Hour)
		for len(pending) > 0 {
			ev := next()
			p, ok := pending[ev.Task]
			if !ok || p.want != ev.Obs.Kind {
				t.Fatalf("event %d %v at the end, want %+v", ev.Task, ev.Obs.Kind, pending)
			}
			delete(pending, ev.Task)
		}
		select {
		case ev := <-e.Events():
			t.Fatalf("event %+v for nothing in progress", ev)
		default:
		}
	})
}
