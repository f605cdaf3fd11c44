package agent

import (
	"testing"
	"time"

	"shoal/internal/clock"
)

// manualClock runs its AfterFunc functions when fire is called, on the
// caller's goroutine (as a simulation's clock does); its time stands
// still.
type manualClock struct {
	now time.Time
	fns []func()
}

func newManualClock(t time.Time) *manualClock { return &manualClock{now: t} }

func (c *manualClock) Now() time.Time                       { return c.now }
func (c *manualClock) After(time.Duration) <-chan time.Time { return nil }
func (c *manualClock) NewTimer(time.Duration) clock.Timer   { return manualTimer{} }
func (c *manualClock) AfterFunc(_ time.Duration, f func()) clock.Timer {
	c.fns = append(c.fns, f)
	return manualTimer{}
}

// fire runs every function armed so far.
func (c *manualClock) fire() {
	fns := c.fns
	c.fns = nil
	for _, f := range fns {
		f()
	}
}

type manualTimer struct{}

func (manualTimer) C() <-chan time.Time      { return nil }
func (manualTimer) Stop() bool               { return false }
func (manualTimer) Reset(time.Duration) bool { return false }

// A stepped simulated executor starts no goroutine and has no Events
// channel: operations that end at once are finished by TakeEvents, timed
// ones when the clock fires them, and TakeEvents hands out the events in
// order.
func TestSteppedSimExecutor(t *testing.T) {
	clk := newManualClock(t0)
	e := NewSteppedSimExecutor(clk, SimConfig{Seed: 1, Start: SimStage{Delay: time.Second}})
	if e.Events() != nil {
		t.Fatal("a stepped executor has an Events channel")
	}
	e.Do(Action{Op: OpPrepare, Task: 1, Run: simRun(1)}) // no delay: done by TakeEvents
	e.Do(Action{Op: OpStart, Task: 2, Run: simRun(2)})   // after 1s on the clock
	evs := e.TakeEvents()
	if len(evs) != 1 || evs[0].Task != 1 || evs[0].Obs.Kind != ObsPrepared {
		t.Fatalf("events before the clock moved: %+v, want task 1 prepared", evs)
	}
	if evs := e.TakeEvents(); len(evs) != 0 {
		t.Fatalf("events handed out twice: %+v", evs)
	}
	clk.fire()
	evs = e.TakeEvents()
	if len(evs) != 1 || evs[0].Task != 2 || evs[0].Obs.Kind != ObsStarted {
		t.Fatalf("events after the clock fired: %+v, want task 2 started", evs)
	}
	// A restarted agent's stepped executor is stepped too, and attaches to
	// the process that kept running.
	r := e.Reopen()
	r.Do(Action{Op: OpAttach, Task: 2})
	if evs := r.TakeEvents(); len(evs) != 1 || evs[0].Obs.Kind != ObsStarted || r.Events() != nil {
		t.Fatalf("the reopened executor: events %+v, channel %v", evs, r.Events())
	}
}
