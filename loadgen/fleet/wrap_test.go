package fleet

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"shoal/agent"
	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// next reads the runner's next event, failing after a while.
func next(tb testing.TB, ex *executor) agent.Event {
	tb.Helper()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case ev := <-ex.Events():
		return ev
	case <-t.C:
		tb.Fatal("no event from the executor")
		return agent.Event{}
	}
}

// The harness knows which tasks run from the events on their way to the
// runner, and its crashes reach the runner as exits with code 137, only
// for tasks started and not touched since.
func TestCrashesOnlyRunningTasks(t *testing.T) {
	ex := newExecutor(agent.NewSimExecutor(clock.Real{}, agent.SimConfig{Seed: 1}), nil, new(atomic.Uint32), clock.Real{})
	defer ex.Close()
	for id := sm.TaskID(1); id <= 3; id++ {
		ex.Do(agent.Action{Op: agent.OpPrepare, Task: id})
		if ev := next(t, ex); ev.Obs.Kind != agent.ObsPrepared {
			t.Fatalf("task %d: %+v, want prepared", id, ev)
		}
		ex.Do(agent.Action{Op: agent.OpStart, Task: id})
		if ev := next(t, ex); ev.Obs.Kind != agent.ObsStarted {
			t.Fatalf("task %d: %+v, want started", id, ev)
		}
	}
	ex.Do(agent.Action{Op: agent.OpStop, Task: 2}) // being stopped: not crashed
	if ev := next(t, ex); ev.Task != 2 || ev.Obs.Kind != agent.ObsExited || ev.Obs.ExitCode != 0 {
		t.Fatalf("%+v, want task 2 exited 0", ev)
	}
	if n := ex.crash(5, rand.New(rand.NewPCG(1, 2))); n != 2 {
		t.Fatalf("crashed %d tasks, want 2 (tasks 1 and 3)", n)
	}
	got := map[sm.TaskID]bool{}
	for range 2 {
		ev := next(t, ex)
		if ev.Obs.Kind != agent.ObsExited || ev.Obs.ExitCode != 137 {
			t.Fatalf("%+v, want a crash", ev)
		}
		got[ev.Task] = true
	}
	if !got[1] || !got[3] {
		t.Fatalf("crashed %v, want tasks 1 and 3", got)
	}
	if n := ex.crash(5, rand.New(rand.NewPCG(1, 2))); n != 0 {
		t.Fatalf("crashed %d more, want none", n)
	}
}

// BenchmarkSimEventToRunner: one task prepared and started by the
// loadgen's executor, each event read as the runner reads it: the
// hand-overs between the simulated executor and the runner.
func BenchmarkSimEventToRunner(b *testing.B) {
	ex := newExecutor(agent.NewSimExecutor(clock.Real{}, agent.SimConfig{Seed: 1}), nil, new(atomic.Uint32), clock.Real{})
	defer ex.Close()
	id := sm.TaskID(0)
	b.ReportAllocs()
	cpu := cpuNow()
	for b.Loop() {
		id++
		ex.Do(agent.Action{Op: agent.OpPrepare, Task: id})
		next(b, ex)
		ex.Do(agent.Action{Op: agent.OpStart, Task: id})
		next(b, ex)
		ex.Do(agent.Action{Op: agent.OpForget, Task: id})
	}
	b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuNow is the CPU time this process used so far (user and system),
// which a loaded machine stretches far less than wall time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkObservationsToTheLoadgen is one observation of a simulated
// agent on its way to the loadgen, about as many at a time as a child
// queues between two flushes in a 100,000-task ramp: queued, batched and
// encoded (to nowhere). Its allocations are the guard.
func BenchmarkObservationsToTheLoadgen(b *testing.B) {
	w := newObsWriter(io.Discard, obsQueueMax)
	sink := obsSink(w.add)
	nets, addrs := []string{"front"}, []string{"10.0.0.5/16"}
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		sink.Hold(7, uint64(i), nets, addrs, now)
		if i%128 == 0 {
			time.Sleep(10 * time.Millisecond) // a flush
		}
	}
	w.close()
	<-w.flushed
}

// slowReader is a loadgen that reads a child's observations slowly: each
// write to it takes a while, so the child's queue builds up between
// flushes, as under a ramp's load.
type slowReader struct{ d time.Duration }

func (s slowReader) Write(p []byte) (int, error) { time.Sleep(s.d); return len(p), nil }

// BenchmarkObservationsToASlowLoadgen is BenchmarkObservationsToTheLoadgen
// with a loadgen that lags: the queue holds tens of thousands of
// observations at a flush (a ramp's child queued up to millions). Its
// allocations per observation are the guard.
func BenchmarkObservationsToASlowLoadgen(b *testing.B) {
	w := newObsWriter(slowReader{5 * time.Millisecond}, 1<<18)
	sink := obsSink(w.add)
	nets, addrs := []string{"front"}, []string{"10.0.0.5/16"}
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		sink.Hold(7, uint64(i), nets, addrs, now)
	}
	w.close()
	<-w.flushed
}

// holdLog is an Observer that writes down the holds and releases it is
// told.
type holdLog struct {
	mu  sync.Mutex
	log []string
}

func (h *holdLog) Handed(node uint32, task uint64, now time.Time) {}
func (h *holdLog) Hold(node uint32, task uint64, nets, addrs []string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, fmt.Sprintf("hold %d %v %v", task, nets, addrs))
}
func (h *holdLog) Release(task uint64, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, fmt.Sprintf("release %d", task))
}

// effective is what a log of holds and releases changes in the checker,
// which takes a hold of a task it holds as no change (check.Checker.Hold).
func effective(log []string) []string {
	held := map[string]bool{}
	var out []string
	for _, l := range log {
		f := strings.Fields(l)
		if f[0] == "hold" {
			if held[f[1]] {
				continue
			}
			held[f[1]] = true
		} else {
			delete(held, f[1])
		}
		out = append(out, l)
	}
	return out
}

// The harness tells the checker what each agent holds as it did when it
// told every prepare and start: the same holds and releases take effect,
// and it tells no hold the checker would take as no change.
func TestHoldsTellTheCheckerWhatItWouldKeep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		obs := &holdLog{}
		ex := newExecutor(agent.NewSimExecutor(clock.Real{}, agent.SimConfig{Seed: 1}), obs, new(atomic.Uint32), clock.Real{})
		defer ex.Close()
		var every []string // what the harness told before: every prepare's and start's hold
		ops := []agent.Op{agent.OpPrepare, agent.OpStart, agent.OpStop, agent.OpForget, agent.OpAttach}
		for i := range rapid.IntRange(1, 50).Draw(t, "steps") {
			id := sm.TaskID(rapid.IntRange(1, 4).Draw(t, fmt.Sprint("task", i)))
			op := rapid.SampledFrom(ops).Draw(t, fmt.Sprint("op", i))
			a := agent.Action{Op: op, Task: id}
			if op == agent.OpPrepare || op == agent.OpStart {
				a.Run = &agent.TaskRun{Task: id, Addresses: []wire.Address{{Network: "front", Addr: fmt.Sprintf("10.0.0.%d/16", id)}}}
				every = append(every, fmt.Sprintf("hold %d [front] [10.0.0.%d/16]", id, id))
			}
			if op == agent.OpForget {
				every = append(every, fmt.Sprintf("release %d", id))
			}
			ex.Do(a)
		}
		obs.mu.Lock()
		got := slices.Clone(obs.log)
		obs.mu.Unlock()
		if want := effective(every); !slices.Equal(effective(got), want) {
			t.Fatalf("the checker keeps %v, want %v", effective(got), want)
		}
		if !slices.Equal(got, effective(got)) {
			t.Fatalf("told %v, of which only %v changes anything", got, effective(got))
		}
	})
}

// BenchmarkSimTaskToTheLoadgen is one task of a simulated agent prepared,
// started and forgotten through the harness, with what the harness tells
// the loadgen (the holds and the release, queued, batched and encoded to
// nowhere).
func BenchmarkSimTaskToTheLoadgen(b *testing.B) {
	w := newObsWriter(io.Discard, obsQueueMax)
	defer func() { w.close(); <-w.flushed }()
	ex := newExecutor(agent.NewSimExecutor(clock.Real{}, agent.SimConfig{Seed: 1}), obsSink(w.add), new(atomic.Uint32), clock.Real{})
	defer ex.Close()
	id := sm.TaskID(0)
	b.ReportAllocs()
	cpu := cpuNow()
	for b.Loop() {
		id++
		run := &agent.TaskRun{Task: id, Service: "web", Addresses: []wire.Address{{Network: "front", Addr: "10.0.0.5/16"}}}
		ex.Do(agent.Action{Op: agent.OpPrepare, Task: id, Run: run})
		next(b, ex)
		ex.Do(agent.Action{Op: agent.OpStart, Task: id, Run: run})
		next(b, ex)
		ex.Do(agent.Action{Op: agent.OpForget, Task: id})
	}
	b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N), "cpu-ns/op")
}

// unflushed returns a child's queue of observations with no flusher, on a
// clock that reads now().
func unflushed(now func() time.Time) *obsWriter {
	o := &obsWriter{flushed: make(chan struct{}), limit: 1 << 20, now: now}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// An assignments answer's tasks told at once queue what telling each
// would: the same observations in the same order, stamps rising.
func TestHandedAllIsHandedForEach(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var clockNow int64 = 1_700_000_000_000_000_000
		now := func() time.Time { return time.Unix(0, clockNow) }
		each, all := unflushed(now), unflushed(now)
		eachSink, allSink := obsSink(each.add), newWriterSink(all)
		for i := range rapid.IntRange(1, 20).Draw(t, "answers") {
			// The clock may stand still or step back between answers.
			clockNow += rapid.Int64Range(-5, 5).Draw(t, fmt.Sprint("tick", i))
			node := rapid.Uint32Range(1, 3).Draw(t, fmt.Sprint("node", i))
			at := time.Unix(0, rapid.Int64Range(0, 1e18).Draw(t, fmt.Sprint("at", i)))
			var tasks []wire.Assignment
			for range rapid.IntRange(0, 6).Draw(t, fmt.Sprint("tasks", i)) {
				tasks = append(tasks, wire.Assignment{Task: sm.TaskID(rapid.Uint64Range(1, 1<<40).Draw(t, "task"))})
			}
			for _, a := range tasks {
				eachSink.Handed(node, uint64(a.Task), at)
			}
			allSink.HandedAll(node, tasks, at)
		}
		flat := func(o *obsWriter) []obs {
			var out []obs
			for _, c := range o.queue {
				out = append(out, c...)
			}
			return out
		}
		got, want := flat(all), flat(each)
		if !slices.EqualFunc(got, want, func(a, b obs) bool {
			return a.Kind == b.Kind && a.Node == b.Node && a.Task == b.Task && a.At == b.At
		}) {
			t.Fatalf("queued %+v, want %+v", got, want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Stamp <= got[i-1].Stamp {
				t.Fatalf("stamp %d after %d", got[i].Stamp, got[i-1].Stamp)
			}
		}
	})
}

// BenchmarkHandedToTheLoadgen is the hand-overs of assignments answers of
// five tasks, from eight agents at once, on their way to the loadgen:
// told one by one, as before, and per answer.
func BenchmarkHandedToTheLoadgen(b *testing.B) {
	for _, per := range []string{"each", "answer"} {
		b.Run(per, func(b *testing.B) {
			w := newObsWriter(io.Discard, obsQueueMax)
			defer func() { w.close(); <-w.flushed }()
			sink := newWriterSink(w)
			tasks := make([]wire.Assignment, 5)
			now := time.Now()
			b.ReportAllocs()
			cpu := cpuNow()
			b.SetParallelism(4) // 8 agents on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if per == "each" {
						for i := range tasks {
							sink.Handed(7, uint64(tasks[i].Task), now)
						}
					} else {
						sink.HandedAll(7, tasks, now)
					}
				}
			})
			b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N*len(tasks)), "cpu-ns/task")
		})
	}
}
