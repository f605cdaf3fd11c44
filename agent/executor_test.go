package agent

import (
	"runtime"
	"testing"

	sm "shoal/statemachine"
)

// TestEventsGoStraightToTheRunner: events reported while the runner is
// busy wait in the Events channel itself, not behind the pump, so the
// runner takes them together in one turn of its loop.
func TestEventsGoStraightToTheRunner(t *testing.T) {
	q := newEventQueue()
	defer q.close()
	for i := range 10 {
		q.push(Event{Task: sm.TaskID(i + 1), Obs: Observation{Kind: ObsPrepared}})
	}
	if n := len(q.out); n != 10 {
		t.Fatalf("%d events in the channel, want all 10 there at once", n)
	}
	for i := range 10 {
		if ev := <-q.out; ev.Task != sm.TaskID(i+1) {
			t.Fatalf("event %d is task %d, want %d", i, ev.Task, i+1)
		}
	}
}

// TestEventsKeepTheirOrder: while events wait in the queue (the runner
// fell behind by more than the channel holds), a new event must not go
// straight into the channel ahead of them.
func TestEventsKeepTheirOrder(t *testing.T) {
	q := newEventQueue()
	defer q.close()
	const n = 200_000
	go func() {
		for i := range n {
			q.push(Event{Task: sm.TaskID(i + 1)})
			if i%97 == 0 {
				runtime.Gosched()
			}
		}
	}()
	for i := range n {
		ev := <-q.out
		if ev.Task != sm.TaskID(i+1) {
			t.Fatalf("event %d is task %d, want %d", i, ev.Task, i+1)
		}
		if i%(eventRoom+13) == 0 {
			for range 50 { // fall behind: the channel fills and events queue
				runtime.Gosched()
			}
		}
	}
}
