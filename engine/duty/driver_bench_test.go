package duty

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// BenchmarkDriver100kTasks: the in-memory cluster, 1,000 nodes; each iteration
// creates 100 services of 1,000 replicas (100,000 pending tasks, untimed),
// then times one RunOnce end to end: scan, placement, and every assignment
// committed. Earlier iterations' tasks stay assigned, so later runs also
// account their load.
func BenchmarkDriver100kTasks(b *testing.B) {
	const (
		nodes    = 1000
		services = 100
		replicas = 1000
		tasks    = services * replicas
	)
	e := newMem(b, 1, nil)
	var cmds []statemachine.Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
			ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%04d", i), Role: statemachine.RoleWorker,
			Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%10)}, CPU: 64_000, Memory: 256 << 30,
		}})
	}
	mustSubmit(b, e, cmds...)
	d := NewDriver(e, DriverConfig{})
	var scan, place, submit time.Duration
	round := 0
	for b.Loop() {
		b.StopTimer()
		cmds = cmds[:0]
		for s := range services {
			spec := statemachine.ServiceSpec{Name: fmt.Sprintf("r%d-svc-%d", round, s), Replicas: replicas,
				CPU: 10, Memory: 16 << 20}
			if s%4 == 0 {
				spec.Constraints = []string{fmt.Sprintf("node.labels.zone!=z%d", s%10)}
			}
			cmds = append(cmds, createSpec(spec))
		}
		round++
		mustSubmit(b, e, cmds...)
		b.StartTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		placed, err := d.RunOnce(ctx)
		cancel()
		if err != nil || placed != tasks {
			b.Fatalf("placed %d of %d: %v (stats %+v)", placed, tasks, err, d.LastRun())
		}
		st := d.LastRun()
		scan, place, submit = scan+st.Scan, place+st.Place, submit+st.Submit
	}
	n := float64(b.N)
	b.ReportMetric(tasks*n/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(scan.Seconds()*1e3/n, "scan-ms")
	b.ReportMetric(place.Seconds()*1e3/n, "place-ms")
	b.ReportMetric(submit.Seconds()*1e3/n, "submit-ms")
}

// BenchmarkDriverRunAmong100kLive: 1,000 nodes carry 100,000 live tasks;
// each iteration scales one service up by 10 (untimed) and times the
// RunOnce that places them. "full" scans every task at each run;
// "incremental" (with a Tracker, as manager.Start wires it) reads the
// tasks the entries since the last run touched.
func BenchmarkDriverRunAmong100kLive(b *testing.B) {
	for _, mode := range []string{"full", "incremental"} {
		b.Run(mode, func(b *testing.B) {
			const nodes, services, replicas = 1000, 100, 1000
			e := newMem(b, 4, nil)
			var tr *Tracker
			if mode == "incremental" {
				tr = NewTracker()
				e.OnApply(tr.OnApply)
			}
			var cmds []statemachine.Command
			for i := 1; i <= nodes; i++ {
				cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
					ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%04d", i), Role: statemachine.RoleWorker,
					Status: statemachine.NodeReady, CPU: 64_000, Memory: 256 << 30}})
			}
			mustSubmit(b, e, cmds...)
			specs := make([]statemachine.ServiceSpec, services)
			cmds = cmds[:0]
			for s := range specs {
				specs[s] = statemachine.ServiceSpec{Name: fmt.Sprintf("svc-%d", s), Replicas: replicas, CPU: 10, Memory: 16 << 20}
				cmds = append(cmds, createSpec(specs[s]))
			}
			mustSubmit(b, e, cmds...)
			d := NewDriver(e, DriverConfig{Tracker: tr})
			ctx := context.Background()
			if n, err := d.RunOnce(ctx); err != nil || n != services*replicas {
				b.Fatalf("placed %d: %v", n, err)
			}
			i := 0
			for b.Loop() {
				b.StopTimer()
				spec := &specs[i%services]
				spec.Replicas += 10
				mustSubmit(b, e, statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: spec})
				i++
				b.StartTimer()
				if n, err := d.RunOnce(ctx); err != nil || n != 10 {
					b.Fatalf("placed %d of 10: %v (stats %+v)", n, err, d.LastRun())
				}
			}
		})
	}
}

// BenchmarkBatchConstraints: what a run pays per pending batch for its
// constraints (three of them): parsed at every run ("each run"), or once
// per spec version ("cached", as the driver does).
func BenchmarkBatchConstraints(b *testing.B) {
	svc := &statemachine.Service{ID: 7, SpecVersion: 3, Spec: statemachine.ServiceSpec{Name: "web",
		Constraints: []string{"node.labels.zone!=z3", "node.role==worker", "node.labels.disk==ssd"}}}
	inf := &svcInfo{key: 1, svc: svc}
	for _, mode := range []string{"each run", "cached"} {
		b.Run(mode, func(b *testing.B) {
			var c *consCache
			if mode == "cached" {
				c = newConsCache()
			}
			for b.Loop() {
				if bt := newBatch(1, inf, 3, c); bt.perr != nil || len(bt.sg.Constraints) != 3 {
					b.Fatal(bt.perr)
				}
				if c != nil {
					c.sweep()
				}
			}
		})
	}
}

// BenchmarkKeptScanMemory: the leader's heap for the kept scan (the node
// table and a record per live or pending task) over 100,000 live tasks on
// 1,000 nodes, per task.
func BenchmarkKeptScanMemory(b *testing.B) {
	const nodes, services, replicas = 1000, 100, 1000
	e := newMem(b, 4, nil)
	var cmds []statemachine.Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
			ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%04d", i), Role: statemachine.RoleWorker,
			Status: statemachine.NodeReady, CPU: 64_000, Memory: 256 << 30}})
	}
	mustSubmit(b, e, cmds...)
	cmds = cmds[:0]
	for s := range services {
		cmds = append(cmds, createSpec(statemachine.ServiceSpec{Name: fmt.Sprintf("svc-%d", s), Replicas: replicas, CPU: 10, Memory: 16 << 20}))
	}
	mustSubmit(b, e, cmds...)
	if n, err := NewDriver(e, DriverConfig{}).RunOnce(context.Background()); err != nil || n != services*replicas {
		b.Fatalf("placed %d: %v", n, err)
	}
	for b.Loop() {
		before := heapInUse()
		var in incremental
		if err := in.rebuild(e); err != nil || in.live != services*replicas {
			b.Fatalf("%d live: %v", in.live, err)
		}
		b.ReportMetric(float64(heapInUse()-before)/(services*replicas), "B/task")
		runtime.KeepAlive(&in)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rampCluster returns an in-memory cluster shaped like a ramp's leader: 4
// service groups, 2,000 ready nodes in 10 zones, 100 services (a quarter
// with a constraint) of replicas pending tasks each, none placed yet.
func rampCluster(b *testing.B, replicas uint32) (*Memory, []statemachine.ServiceSpec) {
	const nodes, services = 2000, 100
	e := newMem(b, 4, nil)
	var cmds []statemachine.Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
			ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%04d", i), Role: statemachine.RoleWorker,
			Status: statemachine.NodeReady, Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%10)},
			CPU: 1 << 40, Memory: 1 << 50}})
	}
	mustSubmit(b, e, cmds...)
	specs := make([]statemachine.ServiceSpec, services)
	cmds = cmds[:0]
	for s := range specs {
		specs[s] = statemachine.ServiceSpec{Name: fmt.Sprintf("svc-%d", s), Replicas: replicas, CPU: 10, Memory: 16 << 20}
		if s%4 == 0 {
			specs[s].Constraints = []string{fmt.Sprintf("node.labels.zone!=z%d", s%10)}
		}
		cmds = append(cmds, createSpec(specs[s]))
	}
	mustSubmit(b, e, cmds...)
	return e, specs
}

// BenchmarkPlanRamp: the plan stage of one run in a ramp, alone: 100
// batches of 1,000 pending tasks (100,000) placed on 2,000 nodes, down to
// the commands the run submits. Each iteration plans on a fresh copy of
// the scanned table (untimed).
func BenchmarkPlanRamp(b *testing.B) {
	e, _ := rampCluster(b, 1000)
	d := NewDriver(e, DriverConfig{})
	indexes, _, err := d.indexes()
	if err != nil {
		b.Fatal(err)
	}
	table, batches, _, err := d.scan(indexes)
	if err != nil || len(batches) != 100 {
		b.Fatalf("%d batches: %v", len(batches), err)
	}
	var buf []assignment
	var cbuf []statemachine.Command
	for b.Loop() {
		b.StopTimer()
		t := table.Clone()
		b.StartTimer()
		p := makePlan(t, batches, 1, buf)
		cmds := p.commands(cbuf)
		if len(cmds) != 100_000 {
			b.Fatalf("planned %d", len(cmds))
		}
		buf, cbuf = keepBuffer(p.assigns), keepBuffer(cmds)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/task")
}

// BenchmarkDriverRamp: one run of a ramp end to end, as manager.Start
// wires the driver (with a Tracker): each iteration scales the 100
// services up by 1,000 tasks each (100,000 new pending tasks, untimed) and
// times the RunOnce that places and commits them on the in-memory
// cluster (whose apply is most of the time: see the stage metrics).
func BenchmarkDriverRamp(b *testing.B) {
	e, specs := rampCluster(b, 0)
	tr := NewTracker()
	e.OnApply(tr.OnApply)
	d := NewDriver(e, DriverConfig{Tracker: tr})
	ctx := context.Background()
	if _, err := d.RunOnce(ctx); err != nil {
		b.Fatal(err)
	}
	var scan, place, submit time.Duration
	cmds := make([]statemachine.Command, len(specs))
	for b.Loop() {
		b.StopTimer()
		for s := range specs {
			specs[s].Replicas += 1000
			cmds[s] = statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &specs[s]}
		}
		mustSubmit(b, e, cmds...)
		b.StartTimer()
		if n, err := d.RunOnce(ctx); err != nil || n != 100_000 {
			b.Fatalf("placed %d: %v (stats %+v)", n, err, d.LastRun())
		}
		st := d.LastRun()
		scan, place, submit = scan+st.Scan, place+st.Place, submit+st.Submit
	}
	n := float64(b.N)
	b.ReportMetric(scan.Seconds()*1e3/n, "scan-ms")
	b.ReportMetric(place.Seconds()*1e3/n, "place-ms")
	b.ReportMetric(submit.Seconds()*1e3/n, "submit-ms")
}

// cpuTimer is a benchmark's timer that also sums the process's CPU time
// (user and system) while it runs: on a machine shared with other work the
// wall time says little, the CPU time spent in the timed part much more.
type cpuTimer struct {
	b       *testing.B
	since   time.Duration
	running bool
	cpu     time.Duration
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c *cpuTimer) start() {
	c.b.StartTimer()
	c.since, c.running = processCPU(), true
}

func (c *cpuTimer) stop() {
	if c.running {
		c.cpu += processCPU() - c.since
	}
	c.running = false
	c.b.StopTimer()
}

// untimedApply is the in-memory cluster with its submissions (the apply
// and the apply fan-out) left out of a benchmark's time, so the figures
// are the driver's own work: its reads, the kept scan, the plan, and
// building what it submits.
type untimedApply struct {
	*Memory
	t *cpuTimer
}

func (u untimedApply) SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	u.t.stop()
	defer u.t.start()
	return u.Memory.SubmitMany(ctx, cmds)
}

// BenchmarkDriverRampRuns: the driver's own cost in a ramp's shape, run
// after run, as manager.Start wires it (with a Tracker): 10,000 ready
// nodes in 10 zones, 4 groups. Before each run (untimed) 4 services of
// 1,000 replicas are created (a quarter of all with a constraint; the
// loadgen's ramp creates whole services) and the tasks the last run
// placed report preparing, starting and running, each in entries of 64
// reports, as agents would, so the run's kept scan reads them. The run is
// timed without the in-memory apply of what it submits (untimedApply).
// ns/task and cpu-ns/task (the process's CPU in the timed part) are per
// task placed.
func BenchmarkDriverRampRuns(b *testing.B) {
	const nodes, perRun, replicas = 10_000, 4, 1000
	e := newMem(b, 4, nil)
	var cmds []statemachine.Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
			ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%05d", i), Role: statemachine.RoleWorker,
			Status: statemachine.NodeReady, Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%10)},
			CPU: 1 << 40, Memory: 1 << 50}})
	}
	mustSubmit(b, e, cmds...)
	tr := NewTracker()
	e.OnApply(tr.OnApply)
	tm := &cpuTimer{b: b}
	d := NewDriver(untimedApply{e, tm}, DriverConfig{Tracker: tr})
	ctx := context.Background()
	if _, err := d.RunOnce(ctx); err != nil {
		b.Fatal(err)
	}
	var last []statemachine.Command // the last run's placements as CmdTaskStatus
	placed, svc := 0, 0
	create := make([]statemachine.Command, perRun)
	b.ResetTimer()
	tm.running = false
	for b.Loop() {
		tm.stop()
		for _, st := range []statemachine.TaskState{statemachine.StatePreparing, statemachine.StateStarting, statemachine.StateRunning} {
			for i := range last {
				last[i].State = st
			}
			for i := 0; i < len(last); i += 64 {
				mustSubmit(b, e, last[i:min(i+64, len(last))]...)
			}
		}
		for s := range create {
			spec := statemachine.ServiceSpec{Name: fmt.Sprintf("svc-%d", svc), Replicas: replicas, CPU: 10, Memory: 16 << 20}
			if svc%4 == 0 {
				spec.Constraints = []string{fmt.Sprintf("node.labels.zone!=z%d", svc%10)}
			}
			create[s] = createSpec(spec)
			svc++
		}
		mustSubmit(b, e, create...)
		tm.start()
		n, err := d.RunOnce(ctx)
		if err != nil || n != perRun*replicas {
			b.Fatalf("placed %d: %v (stats %+v)", n, err, d.LastRun())
		}
		placed += n
		tm.stop()
		last = last[:0]
		for g := 1; g <= e.Groups(); g++ {
			_ = e.ReadLocal(g, func(s *statemachine.State) {
				for t := range s.TasksInOrder() {
					if t.Status.State == statemachine.StateAssigned {
						last = append(last, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: t.ID, Node: t.Node})
					}
				}
			})
		}
		tm.start()
	}
	tm.stop()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(placed), "ns/task")
	b.ReportMetric(float64(tm.cpu.Nanoseconds())/float64(placed), "cpu-ns/task")
}
