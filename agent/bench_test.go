package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// runningMachine returns a machine holding n running tasks, each with one
// address, all acknowledged.
func runningMachine(n int) *Machine {
	m := NewMachine(MachineConfig{})
	f := completeFrame(1)
	for i := 1; i <= n; i++ {
		a := asg(sm.TaskID(i), sm.DesiredRunning)
		a.Addresses = []wire.Address{{Network: "front", Addr: "10.0.0.5/16"}}
		f.Tasks = append(f.Tasks, a)
	}
	_ = m.Apply(f, t0)
	for i := 1; i <= n; i++ {
		m.Observe(Event{Task: sm.TaskID(i), Obs: Observation{Kind: ObsPrepared}}, t0)
		m.Observe(Event{Task: sm.TaskID(i), Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: int32(i), StartTime: 1}}}, t0)
	}
	m.Ready()
	reps := m.BeginBatch(n)
	m.EndBatch(reps, &wire.StatusAck{Results: make([]wire.ReportResult, len(reps))}, t0)
	m.Ready()
	return m
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemoryPerTask measures the agent's memory per task held: the
// machine alone (a real agent; its store is on disk) and the machine with a
// MemStore and a simulated process (a loadgen agent).
func BenchmarkMemoryPerTask(b *testing.B) {
	const n = 10000
	for _, withSim := range []bool{false, true} {
		name := "machine"
		if withSim {
			name = "machine+memstore+sim"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				m := runningMachine(n)
				var st *MemStore
				var sim *SimExecutor
				if withSim {
					st = NewMemStore()
					rd := Ready{}
					for _, id := range m.sortedIDs() {
						rd.Writes.Tasks = append(rd.Writes.Tasks, m.record(m.tasks[id]))
					}
					_ = st.Apply(&rd.Writes)
					sim = NewSimExecutor(nil, SimConfig{})
					for id := sm.TaskID(1); id <= n; id++ {
						sim.startProc(id)
					}
				}
				after := heapInUse()
				b.ReportMetric(float64(after-before)/n, "bytes/task")
				runtime.KeepAlive(m)
				runtime.KeepAlive(st)
				if sim != nil {
					sim.Close()
				}
			}
		})
	}
}

// BenchmarkStatusPush measures how many status reports one agent can push
// through its machine and store per second (the manager answering at once):
// every task changes state, the runner takes batches of 1024, the manager
// accepts them, the acknowledgements are persisted.
func BenchmarkStatusPush(b *testing.B) {
	for _, store := range []string{"mem", "pebble"} {
		b.Run(store, func(b *testing.B) {
			const n = 4096
			m := runningMachine(n)
			var s Store = NewMemStore()
			if store == "pebble" {
				ps, err := OpenPebbleStore(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer ps.Close()
				s = ps
			}
			ack := &wire.StatusAck{Results: make([]wire.ReportResult, 1024)}
			b.ResetTimer()
			start, sent := time.Now(), 0
			for i := 0; i < b.N; i++ {
				// A batch of changes comes in: 1024 tasks stop.
				for j := 0; j < 1024; j++ {
					id := sm.TaskID((i*1024+j)%n + 1)
					t := m.tasks[id]
					t.status.At++ // a new observation of the same state
					t.status.Message = fmt.Sprint(i)
					m.noteStatus(t)
				}
				reps := m.BeginBatch(1024)
				m.EndBatch(reps, ack, t0)
				rd := m.Ready()
				if err := s.Apply(&rd.Writes); err != nil {
					b.Fatal(err)
				}
				sent += len(reps)
			}
			b.ReportMetric(float64(sent)/time.Since(start).Seconds(), "reports/s")
		})
	}
}

// BenchmarkReadyAfterABigFrame is one change's Ready on a machine that
// just wrote 4,096 tasks at once (a frame that assigned them all).
func BenchmarkReadyAfterABigFrame(b *testing.B) {
	m := runningMachine(4096)
	i := 0
	for b.Loop() {
		i++
		m.markTask(m.tasks[sm.TaskID(i%4096+1)])
		if rd := m.Ready(); len(rd.Writes.Tasks) != 1 {
			b.Fatalf("%d tasks written, want 1", len(rd.Writes.Tasks))
		}
	}
}

// BenchmarkSimTaskLife: one task's life through the simulated executor
// (prepare, start, stop, each with a delay and a jitter as the loadgen's
// agents have), with its events read as the runner reads them: the
// executor's own cost per task, without the agent's calls.
func BenchmarkSimTaskLife(b *testing.B) {
	stage := SimStage{Delay: time.Millisecond, Jitter: time.Millisecond}
	clk := clock.NewFake(time.Unix(0, 0))
	e := NewSimExecutor(clk, SimConfig{Seed: 1, Prepare: stage, Start: stage, Stop: stage})
	defer e.Close()
	id := sm.TaskID(0)
	want := func(k ObsKind) {
		if ev := <-e.Events(); ev.Task != id || ev.Obs.Kind != k {
			b.Fatalf("task %d: event %+v, want %v", id, ev, k)
		}
	}
	for b.Loop() {
		id++
		e.Do(Action{Op: OpPrepare, Task: id})
		clk.Advance(2 * time.Millisecond)
		want(ObsPrepared)
		e.Do(Action{Op: OpStart, Task: id})
		clk.Advance(2 * time.Millisecond)
		want(ObsStarted)
		e.Do(Action{Op: OpStop, Task: id})
		clk.Advance(2 * time.Millisecond)
		want(ObsExited)
		e.Do(Action{Op: OpForget, Task: id})
	}
}

// The simulation's draws are a function of (Seed, task, stage) only: the
// kept generator, seeded afresh for each draw, draws what a fresh one
// does, whatever was drawn before.
func TestSimRollIsAFunctionOfSeedTaskAndStage(t *testing.T) {
	st := SimStage{Delay: time.Second, Jitter: time.Second, Outcomes: []SimOutcome{{Weight: 3}, {Weight: 1, Reject: "no"}, {Weight: 2, ExitCode: 7}}}
	e := NewSimExecutor(clock.Real{}, SimConfig{Seed: 42})
	defer e.Close()
	for _, id := range []sm.TaskID{9, 1, 9, 1 << 40, 3, 9} {
		for stage := stagePrepare; stage <= stageStop; stage++ {
			e.world.mu.Lock()
			d, o := e.roll(id, stage, &st)
			e.world.mu.Unlock()
			r := rand.New(rand.NewPCG(42, uint64(id)<<3|uint64(stage)))
			wantD := st.Delay + time.Duration(r.Int64N(int64(st.Jitter)))
			n, want := r.IntN(6), st.Outcomes[0]
			for _, oc := range st.Outcomes {
				if n -= oc.Weight; n < 0 {
					want = oc
					break
				}
			}
			if d != wantD || o.Reject != want.Reject || o.ExitCode != want.ExitCode {
				t.Fatalf("task %d stage %d: drew %v %+v, a fresh generator %v %+v", id, stage, d, o, wantD, want)
			}
		}
	}
}

// BenchmarkTaskOnAnAgent is the agent's own work for its tasks from their
// assignment to running, as a simulated agent of the loadgen does it
// without the transport. An op is one agent's 100 tasks (a 100,000-task
// ramp on 1,000 agents): a fresh agent gets them in four frames of 25
// (each decoded from its wire frame), the machine steps them, the store
// keeps every change, the simulated executor prepares and starts them at
// once, and their statuses go out in encoded batches the manager accepts.
func BenchmarkTaskOnAnAgent(b *testing.B) {
	const perFrame, frames = 25, 4
	spec := wire.Spec{Service: "web", Version: 1, Command: []string{"sleep", "1000"}, Env: []string{"A=1"}, StopGrace: int64(3 * time.Second)}
	frame := func(from, to uint64, first sm.TaskID) []byte {
		f := &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: wire.Cursor{from}, ResultsIn: wire.Cursor{to}, Seqs: []uint64{to}}
		if from == 0 {
			f.Kind, f.AppliesTo, f.Specs = wire.FrameComplete, nil, []wire.Spec{spec}
		}
		for id := first; id < first+perFrame; id++ {
			f.Tasks = append(f.Tasks, wire.Assignment{Task: id, Service: "web", SpecVersion: 1, Slot: uint32(id), State: sm.StateAssigned,
				Desired: sm.DesiredRunning, Addresses: []wire.Address{{Network: "front", Addr: "10.0.0.5/16"}}})
		}
		body, err := wire.Append(nil, f)
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	var bodies [][]byte
	for i := range frames {
		bodies = append(bodies, frame(uint64(i), uint64(i+1), sm.TaskID(i*perFrame+1)))
	}
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		m := NewMachine(MachineConfig{})
		st := NewMemStore()
		e := NewSteppedSimExecutor(clock.NewFake(t0), SimConfig{Seed: 1})
		drain := func() {
			for {
				rd := m.Ready()
				if err := st.Apply(&rd.Writes); err != nil {
					b.Fatal(err)
				}
				for _, a := range rd.Actions {
					e.Do(a)
				}
				evs := e.TakeEvents()
				if len(evs) == 0 && len(rd.Actions) == 0 {
					return
				}
				for _, ev := range evs {
					m.Observe(ev, t0)
				}
			}
		}
		for _, body := range bodies {
			var f wire.Assignments
			if err := wire.DecodeInto(body, &f); err != nil {
				b.Fatal(err)
			}
			if err := m.Apply(&f, t0); err != nil {
				b.Fatal(err)
			}
			drain()
			for m.Unacked() > 0 {
				reps := m.BeginBatch(1024)
				body, err := wire.Append(nil, &wire.StatusBatch{NodeID: 7, SessionID: 1, Reports: reps})
				if err != nil {
					b.Fatal(err)
				}
				var sent wire.StatusBatch
				if err := wire.DecodeInto(body, &sent); err != nil {
					b.Fatal(err)
				}
				m.EndBatch(reps, &wire.StatusAck{Results: make([]wire.ReportResult, len(reps))}, t0)
				drain()
			}
		}
		if running := e.Running(); running != perFrame*frames {
			b.Fatalf("%d tasks running, want %d", running, perFrame*frames)
		}
		e.Close()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	b.ReportMetric(float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())/float64(b.N), "cpu-ns/op")
}

// BenchmarkSimRampOnTheRealClock is the simulated executors of 100 agents
// in a ramp, on the real clock with the loadgen's stage delays: an op is
// every agent's frame of 25 tasks prepared, then started, each event read
// as the runner reads it. cpu-ns/task is the process's CPU per task: the
// executors' timers, goroutines and garbage, which a ramp's agents'
// process pays for every task.
func BenchmarkSimRampOnTheRealClock(b *testing.B) {
	const agents, perFrame = 100, 25
	cfg := SimConfig{Seed: 1, Prepare: SimStage{Delay: 20 * time.Millisecond, Jitter: 100 * time.Millisecond},
		Start: SimStage{Delay: 20 * time.Millisecond, Jitter: 200 * time.Millisecond}}
	exs := make([]*SimExecutor, agents)
	for i := range exs {
		exs[i] = NewSimExecutor(clock.Real{}, cfg)
		defer exs[i].Close()
	}
	id := sm.TaskID(0)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		var wg sync.WaitGroup
		for _, e := range exs {
			first := id + 1
			id += perFrame
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, op := range []Op{OpPrepare, OpStart} {
					for t := first; t < first+perFrame; t++ {
						e.Do(Action{Op: op, Task: t})
					}
					for range perFrame {
						if ev := <-e.Events(); ev.Obs.Kind != ObsPrepared && ev.Obs.Kind != ObsStarted {
							b.Errorf("event %+v", ev)
						}
					}
				}
				for t := first; t < first+perFrame; t++ {
					e.Do(Action{Op: OpForget, Task: t})
				}
			}()
		}
		wg.Wait()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N*agents*perFrame), "cpu-ns/task")
}

// BenchmarkRunnerRampOnTheRealClock is 20 whole runners in a ramp, each
// with an in-memory manager that answers at once, on the real clock with
// the loadgen's stage delays: an op is a frame of 25 tasks to every agent,
// until its manager has accepted every task running. cpu-ns/task is the
// process's CPU per task: the runner's loops and their hand-overs, the
// machine, the store and the simulated executor (and the in-memory
// managers' bookkeeping, the same in every build).
func BenchmarkRunnerRampOnTheRealClock(b *testing.B) {
	const agents, perFrame = 20, 25
	sim := SimConfig{Seed: 1, Prepare: SimStage{Delay: 20 * time.Millisecond, Jitter: 100 * time.Millisecond},
		Start: SimStage{Delay: 20 * time.Millisecond, Jitter: 200 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	defer func() { cancel(); runs.Wait() }()
	mgrs := make([]*fakeManager, agents)
	for i := range mgrs {
		mgrs[i] = newFakeManager(clock.NewFake(t0))
		exec := NewSimExecutor(clock.Real{}, sim)
		defer exec.Close()
		a, err := New(Config{Manager: mgrs[i], Store: NewMemStore(), Clock: clock.Real{}, Seed: uint64(i + 1), Executor: exec,
			Node: wire.NodeDescription{Hostname: fmt.Sprint("n", i)}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		runs.Add(1)
		go func() { defer runs.Done(); _ = a.Run(ctx) }()
		mgrs[i].push(completeFrame(1))
	}
	// running waits until m accepted every task from..to running.
	running := func(m *fakeManager, from, to sm.TaskID) {
		deadline := time.After(30 * time.Second)
		for {
			m.mu.Lock()
			done, ch := true, m.ch
			for id := from; id <= to && done; id++ {
				done = m.latest[id].State == sm.StateRunning
			}
			m.mu.Unlock()
			if done {
				return
			}
			select {
			case <-ch:
			case <-deadline:
				b.Errorf("tasks %d-%d not all running after 30 s", from, to)
				return
			}
		}
	}
	seq, id := uint64(1), sm.TaskID(0)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		var wg sync.WaitGroup
		for _, m := range mgrs {
			first := id + 1
			id += perFrame
			tasks := make([]wire.Assignment, 0, perFrame)
			for t := first; t <= id; t++ {
				tasks = append(tasks, asg(t, sm.DesiredRunning))
			}
			m.push(incFrame(seq, seq+1, tasks))
			wg.Add(1)
			go func() { defer wg.Done(); running(m, first, first+perFrame-1) }()
		}
		seq++
		wg.Wait()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N*agents*perFrame), "cpu-ns/task")
}
