package agent

import (
	"fmt"
	"sync"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

// Executor carries out the operations Step decides for tasks: the real
// process executor and the simulated one implement it. An executor holds no
// lifecycle rules of its own; it performs side effects and reports what it
// observed.
type Executor interface {
	// Do starts an operation. It never blocks on the task and never calls
	// back into its caller; the outcome arrives on Events. Operations on one
	// task are issued one at a time (the next only after the previous
	// answered), except OpForget, which may come at any time and cancels.
	Do(a Action)
	// Events delivers observations, in order per task.
	Events() <-chan Event
	// Sweep ends every process of this executor's that no OpAttach claimed.
	// The agent calls it once, right after issuing the attaches at start, so
	// Do(OpAttach) claims the process before it returns (the answer may
	// still come later on Events).
	Sweep()
	// Close stops the executor's goroutines. Processes keep running (they
	// survive an agent restart).
	Close() error
}

// Action is one operation for an executor.
type Action struct {
	Op     Op
	Task   sm.TaskID
	Run    *TaskRun      // OpPrepare, OpStart
	Grace  time.Duration // OpStop: SIGTERM, then SIGKILL after Grace
	Handle Handle        // OpAttach: the process identity persisted by the last run (zero if none)
}

func (a Action) String() string { return fmt.Sprintf("%v %d", a.Op, a.Task) }

// Event is one observation about one task.
type Event struct {
	Task sm.TaskID
	Obs  Observation
}

// Handle identifies a process across agent restarts: a pid alone may be
// reused, a pid with its start time may not.
type Handle struct {
	Pid       int32
	StartTime uint64 // field 22 of /proc/PID/stat: clock ticks after boot
}

// IsZero reports whether h identifies no process.
func (h Handle) IsZero() bool { return h.Pid == 0 }

// TaskRun is what an executor needs to prepare and start a task.
type TaskRun struct {
	Task      sm.TaskID
	Service   string
	Slot      uint32
	Addresses []wire.Address
	Spec      *wire.Spec // shared, read-only
}

// DefaultStopGrace is the stop grace period of a spec that gives none.
const DefaultStopGrace = 10 * time.Second

// eventQueue is an unbounded queue in front of an Events channel, so that
// Do can report without ever blocking. The channel has room for
// eventRoom events: while the queue is empty and the pump idle, an event
// goes straight into it, and the runner takes every event that arrived
// together in one turn of its loop. Only when the runner falls behind do
// events wait in the queue, for the pump to hand on in order. With an
// unbuffered channel every event went through the pump goroutine and was
// handed from it to the runner one at a time (two goroutine hand-overs per
// event, and one turn of the runner's loop, with its store write, each).
type eventQueue struct {
	mu      sync.Mutex
	q       []Event
	pumping bool // the pump holds events not yet in out: new ones queue behind them
	wake    chan struct{}
	out     chan Event
	done    chan struct{}
	closeMu sync.Once
}

// eventRoom is the room of an executor's Events channel.
const eventRoom = 256

func newEventQueue() *eventQueue {
	e := &eventQueue{wake: make(chan struct{}, 1), out: make(chan Event, eventRoom), done: make(chan struct{})}
	go e.pump()
	return e
}

// newSteppedQueue returns a queue without a pump and without an Events
// channel: its owner takes the events (take).
func newSteppedQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// take returns and clears the queued events (a stepped queue's).
func (e *eventQueue) take() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.q
	e.q = nil
	return out
}

func (e *eventQueue) push(ev Event) {
	e.mu.Lock()
	if e.out != nil && !e.pumping && len(e.q) == 0 {
		select {
		case e.out <- ev: // nothing ahead of it: straight to the runner
			e.mu.Unlock()
			return
		default:
		}
	}
	e.q = append(e.q, ev)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *eventQueue) pump() {
	var spare []Event // the batch delivered last, emptied: the next q
	for {
		e.mu.Lock()
		batch := e.q
		e.q = spare
		e.pumping = len(batch) > 0
		e.mu.Unlock()
		for _, ev := range batch {
			select {
			case e.out <- ev:
			case <-e.done:
				return
			}
		}
		clear(batch) // keep no references for the collector
		spare = batch[:0]
		if cap(spare) > 1<<12 {
			spare = nil // a burst's room is not kept for good
		}
		e.mu.Lock()
		more := len(e.q) > 0
		if !more {
			e.pumping = false
		}
		e.mu.Unlock()
		if more {
			continue // queued behind the batch: hand them on before any new one goes straight
		}
		select {
		case <-e.wake:
		case <-e.done:
			return
		}
	}
}

func (e *eventQueue) close() { e.closeMu.Do(func() { close(e.done) }) }
