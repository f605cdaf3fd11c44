package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"shoal/route"
	"shoal/statemachine"
)

// Benchmark shape: agents (one node each) own services; each round an
// agent reads its pending tasks, the scheduler assigns them to its node,
// and the agent streams reports accepted, preparing, ready, starting,
// running, then failed; the orchestrator replaces failed tasks inside the
// same entry, so the next round has new pending tasks. Seven committed
// transitions per task per round, submitted as one SubmitMany per step by
// many agents at once, so the proposer forms the batches.
const (
	benchAgents           = 64
	benchServicesPerAgent = 2
	benchReplicas         = 128 // tasks per service
	// benchMinTransitions makes every run long enough to measure, whatever
	// b.N is (the framework then settles on one run).
	benchMinTransitions = 300_000
)

func BenchmarkEngineThroughput(b *testing.B) {
	for _, groups := range []int{1, 4, 8} {
		var (
			w    *benchWorkload
			last benchResult
		)
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			if w == nil {
				w = newBenchWorkload(b, groups)
			}
			b.ResetTimer()
			cpu := processCPU(b)
			last = w.run(b, max(b.N, benchMinTransitions))
			cpu = processCPU(b) - cpu
			b.StopTimer()
			// The three replicas' (and the submitters') CPU per committed
			// transition: the wall clock moves with the machine's load.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(last.committed), "cpu-ns/transition")
			b.ReportMetric(last.rate, "transitions/s")
			b.ReportMetric(float64(last.elapsed.Nanoseconds())/float64(last.committed), "ns/op")
			b.ReportMetric(last.p50.Seconds()*1e3, "p50-ms")
			b.ReportMetric(last.p99.Seconds()*1e3, "p99-ms")
		})
		if w != nil {
			w.close()
			fmt.Printf("engine: replicas=3 groups=%d transitions/s=%.0f p50=%s p99=%s\n",
				groups, last.rate, last.p50.Round(10*time.Microsecond), last.p99.Round(10*time.Microsecond))
		}
	}
}

type benchWorkload struct {
	dir    string
	l      *Local
	agents []*benchAgent
}

type benchAgent struct {
	e        *Engine
	node     statemachine.NodeID
	services []string
}

type benchResult struct {
	committed int64
	elapsed   time.Duration
	rate      float64
	p50, p99  time.Duration
}

func newBenchWorkload(b *testing.B, groups int) *benchWorkload {
	dir, err := os.MkdirTemp("", "shoal-engine-bench-")
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Groups: groups, RaftLogLevel: "critical"}
	l, err := StartLocal(dir, 3, cfg)
	if err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	w := &benchWorkload{dir: dir, l: l}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.WaitReady(ctx); err != nil {
		w.close()
		b.Fatal(err)
	}
	// Service names spread evenly over the groups.
	perGroup := benchAgents * benchServicesPerAgent / groups
	byGroup := make([][]string, groups+1)
	for i := 0; ; i++ {
		name := fmt.Sprintf("svc-%d", i)
		if g := route.ServiceGroup(name, groups); len(byGroup[g]) < perGroup {
			byGroup[g] = append(byGroup[g], name)
		}
		if full := func() bool {
			for g := 1; g <= groups; g++ {
				if len(byGroup[g]) < perGroup {
					return false
				}
			}
			return true
		}(); full {
			break
		}
	}
	var names []string
	for i := range perGroup {
		for g := 1; g <= groups; g++ {
			names = append(names, byGroup[g][i])
		}
	}
	var setup []statemachine.Command
	for i := range benchAgents {
		a := &benchAgent{e: l.Engines()[i%3], node: statemachine.NodeID(i + 1)}
		a.services = names[i*benchServicesPerAgent : (i+1)*benchServicesPerAgent]
		w.agents = append(w.agents, a)
		setup = append(setup, statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: a.node, Name: fmt.Sprintf("agent-%d", i), CPU: 1 << 20, Memory: 1 << 45}})
	}
	for _, name := range names {
		setup = append(setup, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: name, Replicas: benchReplicas, Image: "app:1"}})
	}
	submitAll(b, l.Engine(1), setup)
	return w
}

func (w *benchWorkload) close() {
	w.l.Close()
	os.RemoveAll(w.dir)
}

// run lets every agent cycle its tasks until at least target transitions
// committed.
func (w *benchWorkload) run(b *testing.B, target int) benchResult {
	var (
		committed atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		hist      = hdrhistogram.New(1, 60_000_000, 3) // microseconds
		failure   error
	)
	start := time.Now()
	for _, a := range w.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hdrhistogram.New(1, 60_000_000, 3)
			err := a.cycle(&committed, int64(target), h)
			mu.Lock()
			defer mu.Unlock()
			hist.Merge(h)
			if err != nil && failure == nil {
				failure = err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failure != nil {
		b.Fatal(failure)
	}
	n := committed.Load()
	return benchResult{
		committed: n,
		elapsed:   elapsed,
		rate:      float64(n) / elapsed.Seconds(),
		p50:       time.Duration(hist.ValueAtQuantile(50)) * time.Microsecond,
		p99:       time.Duration(hist.ValueAtQuantile(99)) * time.Microsecond,
	}
}

var benchSteps = []statemachine.TaskState{statemachine.StateAccepted, statemachine.StatePreparing,
	statemachine.StateReady, statemachine.StateStarting, statemachine.StateRunning, statemachine.StateFailed}

func (a *benchAgent) cycle(committed *atomic.Int64, target int64, h *hdrhistogram.Histogram) error {
	ctx := context.Background()
	var cmds []statemachine.Command
	submit := func() error {
		t0 := time.Now()
		outs := a.e.SubmitMany(ctx, cmds)
		_ = h.RecordValue(time.Since(t0).Microseconds())
		for i, o := range outs {
			if err := o.Err(); err != nil {
				return fmt.Errorf("agent %d: %s of task %x: %w", a.node, cmds[i].Kind, cmds[i].Task, err)
			}
		}
		committed.Add(int64(len(outs)))
		return nil
	}
	for committed.Load() < target {
		pending, err := a.pending(ctx)
		if err != nil {
			return err
		}
		cmds = cmds[:0]
		for _, id := range pending {
			cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: a.node})
		}
		if err := submit(); err != nil {
			return err
		}
		for _, st := range benchSteps {
			for i := range cmds {
				cmds[i] = statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: pending[i], Node: a.node, State: st}
			}
			if err := submit(); err != nil {
				return err
			}
		}
	}
	return nil
}

// pending reads (linearizably) the agent's services' pending tasks.
func (a *benchAgent) pending(ctx context.Context) ([]statemachine.TaskID, error) {
	var ids []statemachine.TaskID
	for _, name := range a.services {
		err := a.e.Read(ctx, a.e.GroupOfService(name), func(s *statemachine.State) {
			svc := s.ServiceByName(name)
			if svc == nil {
				return
			}
			_, slots := s.SlotTasks(svc.ID)
			for _, tasks := range slots {
				for _, t := range tasks {
					if t.Status.State == statemachine.StatePending {
						ids = append(ids, t.ID)
					}
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}
