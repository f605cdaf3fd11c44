package agent

import (
	"container/heap"
	"math/rand/v2"
	"sync"
	"time"

	"shoal/internal/clock"
	sm "shoal/statemachine"
)

// SimStage is one step of a simulated task's life, in the manner of KWOK's
// stages: it takes Delay plus a uniform [0, Jitter) and ends with one of its
// Outcomes, chosen by weight (none: success).
type SimStage struct {
	Delay    time.Duration
	Jitter   time.Duration
	Outcomes []SimOutcome
}

// SimOutcome is one weighted ending of a stage.
type SimOutcome struct {
	Weight   int    // relative weight; ≤ 0 counts as 0
	Reject   string // Prepare, Start: reject the task with this reason ("" succeeds)
	ExitCode int32  // Run: the code the process exits with (0: complete)
}

// SimConfig describes simulated tasks. The zero value prepares, starts and
// stops at once and runs forever.
type SimConfig struct {
	// Seed makes every delay and outcome a function of (Seed, task, stage):
	// a run replays exactly.
	Seed    uint64
	Prepare SimStage // outcome: success or Reject
	Start   SimStage // outcome: success or Reject
	// Run is how long a started process runs before it exits by itself with
	// one of the outcomes' exit codes; zero Delay and Jitter: until stopped.
	Run  SimStage
	Stop SimStage // how long a stop takes; the process then exits with 0
}

// SimExecutor is an Executor without processes: each task follows the stage
// table on the clock. Its "processes" outlive the executor: Reopen gives the
// executor of a restarted agent, which can attach to them.
type SimExecutor struct {
	clk   clock.Clock
	cfg   SimConfig
	world *simWorld
	q     *eventQueue
	// stepped: no goroutine (NewSteppedSimExecutor); deferred holds the
	// operations that end at once, run by TakeEvents (under world.mu).
	stepped  bool
	deferred []*simOp
	watch    func(Event) // Watch's; nil: none
}

type simWorld struct {
	mu      sync.Mutex
	procs   map[sm.TaskID]*simProc
	pending map[sm.TaskID]*simOp // an operation in progress
	// due holds the operations in progress by their deadline, and wake
	// fires at the earliest (wakeAt; armed while it is set to): one timer
	// per world rather than one per operation, each of which ran in a
	// goroutine of its own when it fired (a sixth of the simulated
	// agents' process in a ramp went to timers, their goroutines and
	// their garbage). A stepped executor's operations have a timer each
	// on its simulation's clock instead (simOp.t).
	due     opHeap
	wake    clock.Timer
	wakeAt  time.Time
	armed   bool
	nextPid int32
	// pcg and rng draw each stage's delay and outcome, seeded afresh for
	// each (roll); kept to spare two allocations per draw.
	pcg rand.PCG
	rng *rand.Rand
	// free holds operations done or cancelled, for the next ones (an
	// executor on the real clock's: a stepped one's have timers that may
	// still name them).
	free []*simOp
}

type simProc struct {
	owner   *SimExecutor // the executor that reports its exit; nil after Reopen until attached
	handle  Handle
	exit    clock.Timer // nil: runs until stopped
	claimed bool        // started or attached by the owner
}

// NewSimExecutor returns a simulated executor on clk.
func NewSimExecutor(clk clock.Clock, cfg SimConfig) *SimExecutor {
	return &SimExecutor{clk: clk, cfg: cfg, q: newEventQueue(),
		world: &simWorld{procs: map[sm.TaskID]*simProc{}, pending: map[sm.TaskID]*simOp{}, nextPid: 1000}}
}

// NewSteppedSimExecutor returns a simulated executor that starts no
// goroutine, for a deterministic simulation that runs everything in one
// loop: Events is nil, and the loop takes the events with TakeEvents after
// each Do and each time clk fired timers. clk must run AfterFunc's
// functions on the loop's goroutine (a simulation's clock), not in their
// own.
func NewSteppedSimExecutor(clk clock.Clock, cfg SimConfig) *SimExecutor {
	e := NewSimExecutor(clk, cfg)
	e.q.close() // its pump
	e.q, e.stepped = newSteppedQueue(), true
	return e
}

// TakeEvents returns, in order, the events a stepped executor observed
// since the last call, first finishing the operations that end at once.
func (e *SimExecutor) TakeEvents() []Event {
	for {
		e.world.mu.Lock()
		ops := e.deferred
		e.deferred = nil
		e.world.mu.Unlock()
		if len(ops) == 0 {
			return e.q.take()
		}
		for _, op := range ops {
			op.run()
		}
	}
}

// Reopen closes e and returns the executor of a restarted agent over the
// same simulated processes: they keep running, operations in progress are
// lost, as with a real agent killed and started again.
func (e *SimExecutor) Reopen() *SimExecutor {
	e.Close()
	w := e.world
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, op := range w.pending {
		w.cancelLocked(op)
		delete(w.pending, id)
	}
	for _, p := range w.procs {
		p.owner, p.claimed = nil, false
	}
	if e.stepped {
		return &SimExecutor{clk: e.clk, cfg: e.cfg, world: w, q: newSteppedQueue(), stepped: true}
	}
	return &SimExecutor{clk: e.clk, cfg: e.cfg, world: w, q: newEventQueue()}
}

// Watch has f told every event as the executor queues it for the runner,
// in order, injected ones too: the loadgen's harness follows which tasks
// run without a goroutine and a channel of its own between the executor
// and the runner (one more hand-over per event). Call it before the
// executor is used. f must not block nor call the executor; it may be
// called with the executor's own lock held.
func (e *SimExecutor) Watch(f func(Event)) { e.watch = f }

// Inject queues ev for the runner as if the executor had observed it (the
// loadgen's crashes).
func (e *SimExecutor) Inject(ev Event) { e.report(ev) }

// report queues ev for the runner, telling the watcher first.
func (e *SimExecutor) report(ev Event) {
	if e.watch != nil {
		e.watch(ev)
	}
	e.q.push(ev)
}

// Running returns how many simulated processes run.
func (e *SimExecutor) Running() int {
	e.world.mu.Lock()
	defer e.world.mu.Unlock()
	return len(e.world.procs)
}

// Events delivers observations.
func (e *SimExecutor) Events() <-chan Event { return e.q.out }

// Close stops delivering events.
func (e *SimExecutor) Close() error {
	e.q.close()
	return nil
}

// stage numbers for seeding
const (
	stagePrepare = iota + 1
	stageStart
	stageRun
	stageStop
)

// roll returns the delay and outcome of one stage for one task: a function
// of (Seed, task, stage) only. w.mu is held.
func (e *SimExecutor) roll(id sm.TaskID, stage int, s *SimStage) (time.Duration, SimOutcome) {
	w := e.world
	if w.rng == nil {
		w.rng = rand.New(&w.pcg)
	}
	w.pcg.Seed(e.cfg.Seed, uint64(id)<<3|uint64(stage))
	r := w.rng
	d := s.Delay
	if s.Jitter > 0 {
		d += time.Duration(r.Int64N(int64(s.Jitter)))
	}
	total := 0
	for _, o := range s.Outcomes {
		total += max(o.Weight, 0)
	}
	if total == 0 {
		return d, SimOutcome{}
	}
	n := r.IntN(total)
	for _, o := range s.Outcomes {
		if n -= max(o.Weight, 0); n < 0 {
			return d, o
		}
	}
	return d, SimOutcome{}
}

// afterLocked runs the stage's end (simOp.run) after d as the task's
// pending operation (at once for d ≤ 0). Callers hold w.mu; the end runs
// without it and takes it itself.
func (e *SimExecutor) afterLocked(id sm.TaskID, d time.Duration, stage int, o SimOutcome) {
	w := e.world
	var op *simOp
	if n := len(w.free); n > 0 && !e.stepped {
		op, w.free[n-1] = w.free[n-1], nil
		w.free = w.free[:n-1]
	} else {
		op = new(simOp)
	}
	*op = simOp{e: e, id: id, stage: stage, o: o, idx: -1}
	if d <= 0 {
		if e.stepped {
			e.deferred = append(e.deferred, op)
			return
		}
		go op.run()
		return
	}
	if e.stepped {
		op.t = e.clk.AfterFunc(d, func() {
			w.mu.Lock()
			if w.pending[id] != op {
				w.mu.Unlock()
				return // cancelled by Forget or Reopen
			}
			delete(w.pending, id)
			w.mu.Unlock()
			op.run()
		})
		w.pending[id] = op
		return
	}
	if old := w.pending[id]; old != nil {
		w.cancelLocked(old)
	}
	op.at = e.clk.Now().Add(d)
	w.pending[id] = op
	heap.Push(&w.due, op)
	if !w.armed || op.at.Before(w.wakeAt) {
		w.armLocked(e.clk, d, op.at)
	}
}

// simOp is an operation in progress: its stage ends at `at` unless
// cancelled. It names its stage and outcome rather than holding a
// function: a closure per stage was one more allocation per operation.
type simOp struct {
	at    time.Time
	e     *SimExecutor
	id    sm.TaskID
	stage int
	o     SimOutcome
	idx   int         // in simWorld.due; -1 when not there
	t     clock.Timer // a stepped executor's
}

// run ends op's stage: what the executor observes then. It runs without
// w.mu.
func (op *simOp) run() {
	e, id, o := op.e, op.id, op.o
	switch op.stage {
	case stagePrepare, stageStart:
		switch {
		case o.Reject != "":
			e.report(Event{id, Observation{Kind: ObsRejected, Message: o.Reject}})
		case op.stage == stagePrepare:
			e.report(Event{id, Observation{Kind: ObsPrepared}})
		default:
			e.startProc(id)
		}
	case stageStop:
		e.endProc(id, 0)
	}
}

// cancelLocked drops op (w.mu held; the caller deletes it from pending).
func (w *simWorld) cancelLocked(op *simOp) {
	if op.t != nil {
		op.t.Stop()
	}
	if op.idx >= 0 {
		heap.Remove(&w.due, op.idx)
		w.recycleLocked(op)
	}
}

// recycleLocked keeps op, done or cancelled, for a later operation (an
// executor on the real clock's only, whose operations nothing names once
// they left the heap; up to a frame's worth).
func (w *simWorld) recycleLocked(op *simOp) {
	if op.t == nil && len(w.free) < 256 {
		*op = simOp{}
		w.free = append(w.free, op)
	}
}

// armLocked sets the world's timer to fire after d (at at).
func (w *simWorld) armLocked(clk clock.Clock, d time.Duration, at time.Time) {
	w.armed, w.wakeAt = true, at
	if w.wake == nil {
		w.wake = clk.AfterFunc(d, func() { w.fire(clk) })
		return
	}
	w.wake.Reset(d)
}

// fire runs the operations that are due, in deadline order, each without
// w.mu (it takes it itself), and sets the timer for the next.
func (w *simWorld) fire(clk clock.Clock) {
	w.mu.Lock()
	w.armed = false
	for {
		now := clk.Now()
		if len(w.due) == 0 {
			w.mu.Unlock()
			return
		}
		op := w.due[0]
		if op.at.After(now) {
			if !w.armed || op.at.Before(w.wakeAt) {
				w.armLocked(clk, op.at.Sub(now), op.at)
			}
			w.mu.Unlock()
			return
		}
		heap.Pop(&w.due)
		delete(w.pending, op.id)
		w.mu.Unlock()
		op.run()
		w.mu.Lock()
		w.recycleLocked(op)
	}
}

// opHeap orders operations by deadline (container/heap).
type opHeap []*simOp

func (h opHeap) Len() int           { return len(h) }
func (h opHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h opHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *opHeap) Push(x any) {
	op := x.(*simOp)
	op.idx = len(*h)
	*h = append(*h, op)
}
func (h *opHeap) Pop() any {
	old := *h
	op := old[len(old)-1]
	old[len(old)-1] = nil
	op.idx = -1
	*h = old[:len(old)-1]
	return op
}

// Do performs a without blocking.
func (e *SimExecutor) Do(a Action) {
	w := e.world
	w.mu.Lock()
	defer w.mu.Unlock()
	id := a.Task
	switch a.Op {
	case OpPrepare:
		d, o := e.roll(id, stagePrepare, &e.cfg.Prepare)
		e.afterLocked(id, d, stagePrepare, o)
	case OpStart:
		d, o := e.roll(id, stageStart, &e.cfg.Start)
		e.afterLocked(id, d, stageStart, o)
	case OpStop:
		d, _ := e.roll(id, stageStop, &e.cfg.Stop)
		e.afterLocked(id, d, stageStop, SimOutcome{})
	case OpAttach:
		p := w.procs[id]
		if p == nil || (!a.Handle.IsZero() && p.handle != a.Handle) {
			e.report(Event{id, Observation{Kind: ObsLost}})
			return
		}
		p.owner, p.claimed = e, true
		e.report(Event{id, Observation{Kind: ObsStarted, Handle: p.handle}})
	case OpForget:
		if op := w.pending[id]; op != nil {
			w.cancelLocked(op)
			delete(w.pending, id)
		}
		if p := w.procs[id]; p != nil && p.owner == e {
			e.killLocked(id, p)
		}
	}
}

func (e *SimExecutor) startProc(id sm.TaskID) {
	w := e.world
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextPid++
	p := &simProc{owner: e, handle: Handle{Pid: w.nextPid, StartTime: uint64(w.nextPid)}, claimed: true}
	w.procs[id] = p
	if e.cfg.Run.Delay > 0 || e.cfg.Run.Jitter > 0 {
		d, o := e.roll(id, stageRun, &e.cfg.Run)
		p.exit = e.clk.AfterFunc(d, func() { e.endProcOf(id, p, o.ExitCode) })
	}
	e.report(Event{id, Observation{Kind: ObsStarted, Handle: p.handle}})
}

// endProc ends the task's process with code and reports it.
func (e *SimExecutor) endProc(id sm.TaskID, code int32) {
	e.world.mu.Lock()
	p := e.world.procs[id]
	e.world.mu.Unlock()
	if p != nil {
		e.endProcOf(id, p, code)
	}
}

func (e *SimExecutor) endProcOf(id sm.TaskID, p *simProc, code int32) {
	w := e.world
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.procs[id] != p {
		return
	}
	owner := p.owner
	e.killLocked(id, p)
	if owner != nil {
		owner.report(Event{id, Observation{Kind: ObsExited, ExitCode: code}})
	}
}

func (e *SimExecutor) killLocked(id sm.TaskID, p *simProc) {
	if p.exit != nil {
		p.exit.Stop()
	}
	delete(e.world.procs, id)
}

// Sweep ends every simulated process no task claimed.
func (e *SimExecutor) Sweep() {
	w := e.world
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, p := range w.procs {
		if !p.claimed {
			e.killLocked(id, p)
		}
	}
}
