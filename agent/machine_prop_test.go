package agent

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	sm "shoal/statemachine"
	"shoal/wire"
)

// A property test of the machine against a model manager and a model
// executor, through random frames, executor answers, process exits, syncs,
// status answers and agent restarts. Each property is one sentence:
//
//   - P1: the agent never prepares or starts a task the manager last told it
//     to shut down or remove, or that is out of its assignment set, and
//     never starts one held at ready;
//   - P2: an executor never gets a second operation for a task before the
//     first one answered;
//   - P3: the states the agent reports for a task never go down in rank;
//   - P4: the agent never forgets a task whose process still runs;
//   - P5: the statuses owed are those of the tasks in the set whose latest
//     status the manager has not acknowledged, and a batch takes the
//     lowest task IDs among those not in a batch already.

type propModel struct {
	t        *rapid.T
	m        *Machine
	store    *MemStore
	cursor   uint64
	desired  map[sm.TaskID]sm.DesiredState // the manager's latest word
	inSet    map[sm.TaskID]bool
	gone     map[sm.TaskID]bool // left the set: task IDs are never reused
	inflight map[sm.TaskID]Op   // executor operations not yet answered
	live     map[sm.TaskID]bool // model processes
	reported map[sm.TaskID]sm.TaskState
	queue    []Event // answers the model executor will deliver
}

const propTasks = 5

func (p *propModel) now() time.Time { return t0 }

// drain takes the machine's Ready, persists it, checks every action and
// plays the model executor's side of it.
func (p *propModel) drain() {
	p.checkOwed()
	rd := p.m.Ready()
	if err := p.store.Apply(&rd.Writes); err != nil {
		p.t.Fatal(err)
	}
	for _, a := range rd.Actions {
		p.act(a)
	}
}

func (p *propModel) act(a Action) {
	id := a.Task
	switch a.Op {
	case OpPrepare, OpStart:
		d := p.desired[id]
		if !p.inSet[id] || d.Stopping() || (a.Op == OpStart && d != sm.DesiredRunning) {
			p.t.Fatalf("P1: %v issued for task %d, desired %v, in set %v", a.Op, id, d, p.inSet[id])
		}
	case OpForget:
		if p.live[id] {
			p.t.Fatalf("P4: task %d forgotten while its process runs", id)
		}
		delete(p.inflight, id)
		return
	}
	if op, busy := p.inflight[id]; busy {
		p.t.Fatalf("P2: %v issued for task %d while %v is in flight", a.Op, id, op)
	}
	p.inflight[id] = a.Op
}

// answer delivers the executor's answer to one operation in flight.
func (p *propModel) answer(t *rapid.T) {
	var ids []sm.TaskID
	for _, id := range sortedKeys(p.inflight) {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return
	}
	id := rapid.SampledFrom(ids).Draw(t, "task")
	op := p.inflight[id]
	delete(p.inflight, id)
	ok := rapid.IntRange(0, 4).Draw(t, "outcome") > 0
	var obs Observation
	switch op {
	case OpPrepare:
		obs.Kind = map[bool]ObsKind{true: ObsPrepared, false: ObsRejected}[ok]
	case OpStart:
		obs.Kind = map[bool]ObsKind{true: ObsStarted, false: ObsRejected}[ok]
		p.live[id] = ok
	case OpStop:
		obs = Observation{Kind: ObsExited, ExitCode: 143}
		p.live[id] = false
	case OpAttach:
		obs.Kind = map[bool]ObsKind{true: ObsStarted, false: ObsLost}[p.live[id]]
	}
	p.m.Observe(Event{Task: id, Obs: obs}, p.now())
	p.drain()
}

func (p *propModel) frame(t *rapid.T) {
	complete := rapid.IntRange(0, 5).Draw(t, "complete") == 0
	f := &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: wire.Cursor{p.cursor},
		ResultsIn: wire.Cursor{p.cursor + 1}, Seqs: []uint64{p.cursor + 1}, Specs: []wire.Spec{webSpec}}
	if complete {
		f.Kind, f.AppliesTo = wire.FrameComplete, nil
	}
	for id := sm.TaskID(1); id <= propTasks; id++ {
		if p.gone[id] {
			continue
		}
		switch rapid.IntRange(0, 3).Draw(t, fmt.Sprint("change", id)) {
		case 0: // unchanged; a COMPLETE keeps it
			if complete && p.inSet[id] {
				f.Tasks = append(f.Tasks, asg(id, p.desired[id]))
			}
		case 1:
			if p.inSet[id] {
				if !complete { // a COMPLETE just leaves it out
					f.Removed = append(f.Removed, id)
				}
				p.inSet[id], p.gone[id] = false, true
			}
		default:
			// Desired only moves up, except ready → running.
			d := sm.DesiredState(rapid.IntRange(0, 3).Draw(t, fmt.Sprint("desired", id)))
			if old, ok := p.desired[id]; ok && p.inSet[id] && d < old && !(old == sm.DesiredReady && d == sm.DesiredRunning) {
				d = old
			}
			a := asg(id, d)
			f.Tasks = append(f.Tasks, a)
			p.desired[id], p.inSet[id] = d, true
		}
	}
	p.cursor++
	if err := p.m.Apply(f, p.now()); err != nil {
		t.Fatal(err)
	}
	p.drain()
}

// exit ends a running process by itself.
func (p *propModel) exit(t *rapid.T) {
	for _, id := range sortedKeys(p.live) {
		if p.live[id] && p.inflight[id] == OpNone {
			p.live[id] = false
			p.m.Observe(Event{Task: id, Obs: Observation{Kind: ObsExited, ExitCode: 1}}, p.now())
			p.drain()
			return
		}
	}
}

// owedNow is what the machine owes the manager, by a scan of its tasks:
// every owed task, and those not in an unanswered batch, in ID order.
func (p *propModel) owedNow() (owed int, idle []sm.TaskID) {
	for _, id := range sortedKeys(p.m.tasks) {
		if t := p.m.tasks[id]; t.inSet && t.status != t.acked {
			owed++
			if !t.sending {
				idle = append(idle, id)
			}
		}
	}
	return owed, idle
}

func (p *propModel) checkOwed() {
	owed, idle := p.owedNow()
	if p.m.Unacked() != owed || p.m.owedIdle() != len(idle) {
		p.t.Fatalf("P5: the machine owes %d statuses (%d not in a batch), a scan of its tasks %d (%v)", p.m.Unacked(), p.m.owedIdle(), owed, idle)
	}
}

func (p *propModel) statuses(t *rapid.T) {
	limit := rapid.IntRange(1, propTasks).Draw(t, "limit")
	_, idle := p.owedNow()
	reps := p.m.BeginBatch(limit)
	var took []sm.TaskID
	for _, r := range reps {
		took = append(took, r.Task)
	}
	if want := idle[:min(limit, len(idle))]; fmt.Sprint(took) != fmt.Sprint(want) {
		t.Fatalf("P5: a batch of at most %d took %v, owed and not in a batch %v", limit, took, idle)
	}
	for _, r := range reps {
		if r.State < p.reported[r.Task] {
			t.Fatalf("P3: task %d reported %v after %v", r.Task, r.State, p.reported[r.Task])
		}
		p.reported[r.Task] = r.State
	}
	var ack *wire.StatusAck
	if rapid.IntRange(0, 3).Draw(t, "ackOK") > 0 {
		ack = &wire.StatusAck{}
		for range reps {
			ack.Results = append(ack.Results, wire.ReportResult(rapid.IntRange(0, 2).Draw(t, "result")))
		}
	}
	p.m.EndBatch(reps, ack, p.now())
	p.drain()
}

func (p *propModel) destroy(t *rapid.T) {
	id := sm.TaskID(rapid.IntRange(1, propTasks).Draw(t, "destroy"))
	p.m.Destroy([]sm.TaskID{id}, p.now())
	p.drain()
}

// restart kills the agent: operations in flight are lost (a start in flight
// may or may not have started its process), processes run on.
func (p *propModel) restart(t *rapid.T) {
	for id, op := range p.inflight {
		if op == OpStart && rapid.Bool().Draw(t, "started") {
			p.live[id] = true
		}
	}
	clear(p.inflight)
	st, _ := p.store.Load()
	p.m = NewMachine(MachineConfig{})
	p.m.Restore(st)
	rd := p.m.Ready()
	if err := p.store.Apply(&rd.Writes); err != nil {
		t.Fatal(err)
	}
	claimed := map[sm.TaskID]bool{}
	for _, a := range rd.Actions {
		if a.Op == OpAttach {
			claimed[a.Task] = true
		}
		p.act(a)
	}
	for id := range p.live { // Sweep
		if !claimed[id] {
			p.live[id] = false
		}
	}
	p.cursor = p.m.Cursor().Get(0)
}

func TestMachineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := &propModel{t: t, m: NewMachine(MachineConfig{}), store: NewMemStore(),
			desired: map[sm.TaskID]sm.DesiredState{}, inSet: map[sm.TaskID]bool{}, gone: map[sm.TaskID]bool{},
			inflight: map[sm.TaskID]Op{},
			live:     map[sm.TaskID]bool{}, reported: map[sm.TaskID]sm.TaskState{}}
		t.Repeat(map[string]func(*rapid.T){
			"frame":    p.frame,
			"answer":   p.answer,
			"exit":     p.exit,
			"statuses": p.statuses,
			"destroy":  p.destroy,
			"restart":  p.restart,
		})
	})
}
