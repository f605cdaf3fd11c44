package statemachine

import (
	"bytes"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// buildRunning returns a state with services×replicas tasks, all running,
// spread over nodes nodes.
func buildRunning(tb testing.TB, services, replicas, nodes int) *State {
	s := New(Config{Group: 1})
	var out Output
	index := uint64(0)
	apply := func(cmds []Command) {
		index++
		s.Apply(cmds, index, int64(index)*1e6, &out)
		for i, r := range out.Results {
			if r.Code != CodeOK {
				tb.Fatalf("setup command %d (%s): %v", i, cmds[i].Kind, r.Err())
			}
		}
	}
	var cmds []Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
	}
	apply(cmds)
	for i := 0; i < services; i++ {
		apply([]Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: uint32(replicas)}}})
	}
	ids := s.TaskIDs()
	cmds = cmds[:0]
	for i, id := range ids {
		cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: NodeID(i%nodes + 1)})
		if len(cmds) == 10000 {
			apply(cmds)
			cmds = cmds[:0]
		}
	}
	apply(cmds)
	cmds = cmds[:0]
	for i, id := range ids {
		cmds = append(cmds, Command{Kind: CmdTaskStatus, Task: id, Node: NodeID(i%nodes + 1), State: StateRunning})
		if len(cmds) == 10000 {
			apply(cmds)
			cmds = cmds[:0]
		}
	}
	apply(cmds)
	return s
}

// statusBatches returns, for tasks assigned to nodes round-robin, the five
// batches of agent reports that take them from assigned to running.
func statusBatches(ids []TaskID, nodes int) [][]Command {
	var batches [][]Command
	for _, st := range []TaskState{StateAccepted, StatePreparing, StateReady, StateStarting, StateRunning} {
		b := make([]Command, len(ids))
		for i, id := range ids {
			b[i] = Command{Kind: CmdTaskStatus, Task: id, Node: NodeID(i%nodes + 1), State: st}
		}
		batches = append(batches, b)
	}
	return batches
}

// assignedSnapshot is a state of n assigned tasks, saved so each benchmark
// round starts from it.
func assignedSnapshot(tb testing.TB, n, nodes int) ([]byte, []TaskID) {
	s := New(Config{Group: 1})
	var out Output
	var cmds []Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
	}
	cmds = append(cmds, Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: uint32(n)}})
	s.Apply(cmds, 1, 1, &out)
	ids := s.TaskIDs()
	cmds = cmds[:0]
	for i, id := range ids {
		cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: NodeID(i%nodes + 1)})
	}
	s.Apply(cmds, 2, 2, &out)
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), ids
}

// BenchmarkApplyStatusReports applies batches of 10,000 agent status
// reports (assigned → accepted → … → running, five batches per round).
func BenchmarkApplyStatusReports(b *testing.B) {
	const tasks, nodes = 10000, 100
	snap, ids := assignedSnapshot(b, tasks, nodes)
	batches := statusBatches(ids, nodes)
	var out Output
	var transitions, mallocs uint64
	var ms runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		s := New(Config{})
		if err := s.Load(bytes.NewReader(snap)); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		for i, batch := range batches {
			s.Apply(batch, s.LastIndex()+uint64(i)+1, int64(i), &out)
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		transitions += uint64(len(batches) * tasks)
		b.StartTimer()
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(transitions)/sec, "transitions/s")
	b.ReportMetric(float64(mallocs)/float64(transitions), "allocs/transition")
}

// TestApplyStatusAllocs guards the hot path: applying agent reports
// allocates nothing per transition once the output buffers exist.
func TestApplyStatusAllocs(t *testing.T) {
	snap, ids := assignedSnapshot(t, 1000, 10)
	s := New(Config{})
	if err := s.Load(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	batches := statusBatches(ids, 10)
	out := Output{Results: make([]Result, 0, 1000), Effects: make([]Effect, 0, 16)}
	i := 0
	allocs := testing.AllocsPerRun(4, func() {
		s.Apply(batches[i], s.LastIndex()+1, int64(i), &out)
		i++
	})
	if allocs > 2 {
		t.Fatalf("a batch of 1000 reports allocated %.0f times; want ~0 per transition", allocs)
	}
	for _, r := range out.Results {
		if r.Code != CodeOK {
			t.Fatalf("report rejected: %v", r.Err())
		}
	}
}

// BenchmarkHeapPerTask measures live heap bytes per task in a state of
// 1,000,000 running tasks (100 services × 10,000 replicas on 1,000 nodes).
func BenchmarkHeapPerTask(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := buildRunning(b, 100, 10000, 1000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(s.NumTasks()), "heap-bytes/task")
		runtime.KeepAlive(s)
	}
}

// BenchmarkSnapshot1M saves and loads a state of 1,000,000 tasks; MB/s is
// of the canonical (uncompressed) encoding.
func BenchmarkSnapshot1M(b *testing.B) {
	s := buildRunning(b, 100, 10000, 1000)
	raw := float64(len(s.Canonical()))
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		b.Fatal(err)
	}
	b.Run("save", func(b *testing.B) {
		var out bytes.Buffer
		for b.Loop() {
			out.Reset()
			if err := s.Save(&out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(raw/1e6/(b.Elapsed().Seconds()/float64(b.N)), "MB/s")
		b.ReportMetric(float64(out.Len()), "snapshot-bytes")
		b.ReportMetric(raw, "canonical-bytes")
	})
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			l := New(Config{})
			if err := l.Load(bytes.NewReader(buf.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(raw/1e6/(b.Elapsed().Seconds()/float64(b.N)), "MB/s")
	})
}

// BenchmarkApplyDuringRollingUpdate applies batches of 100 task failures
// to a 10,000-replica service in the middle of a rolling update
// (parallelism 1, a minute between slots): a batch's cost should follow
// the batch, not the size of the service being updated.
func BenchmarkApplyDuringRollingUpdate(b *testing.B) {
	const replicas, nodes, batch = 10000, 100, 100
	s := buildRunning(b, 1, replicas, nodes)
	var out Output
	s.Apply([]Command{{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "svc-0", Replicas: replicas, Env: []string{"V=2"},
		Update: UpdateConfig{Parallelism: 1, Delay: 60e9}}}}, s.LastIndex()+1, s.LastTime()+1, &out)
	if r := out.Results[0]; r.Code != CodeOK {
		b.Fatalf("update: %v", r.Err())
	}
	var snap bytes.Buffer
	if err := s.Save(&snap); err != nil {
		b.Fatal(err)
	}
	ids := s.TaskIDs()
	var failures [][]Command
	for i := 0; i+batch <= len(ids) && len(failures) < 20; i += batch {
		var cmds []Command
		for _, id := range ids[i : i+batch] {
			if t := s.Task(id); t.Status.State == StateRunning {
				cmds = append(cmds, Command{Kind: CmdTaskStatus, Task: id, Node: t.Node, State: StateFailed})
			}
		}
		failures = append(failures, cmds)
	}
	applied := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		l := New(Config{})
		if err := l.Load(bytes.NewReader(snap.Bytes())); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, cmds := range failures {
			l.Apply(cmds, l.LastIndex()+1, l.LastTime()+1e6, &out)
			applied++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(applied)/1e3, "µs/batch")
}

// BenchmarkTimerTickWithUnknownTasks fires the timers of a 100,000-task
// state whose services have an hour-long disconnect window, with a tenth
// of the nodes disconnected (10,000 unknown tasks): a tick should cost
// what is due, not what waits.
func BenchmarkTimerTickWithUnknownTasks(b *testing.B) {
	const services, replicas, nodes = 10, 10000, 1000
	s := buildRunning(b, services, replicas, nodes)
	var out Output
	step := func(cmds []Command) {
		s.Apply(cmds, s.LastIndex()+1, s.LastTime()+1e6, &out)
		for _, r := range out.Results {
			if r.Code != CodeOK {
				b.Fatalf("setup: %v", r.Err())
			}
		}
	}
	var cmds []Command
	for i := range services {
		spec := s.ServiceByName(fmt.Sprintf("svc-%d", i)).Spec
		spec.Disconnect.LostAfter = 3600e9
		cmds = append(cmds, Command{Kind: CmdUpdateService, Spec: &spec})
	}
	step(cmds)
	cmds = cmds[:0]
	for i := 1; i <= nodes/10; i++ {
		cmds = append(cmds, Command{Kind: CmdSetNodeStatus, Node: NodeID(i), NodeStatus: NodeDisconnected})
	}
	step(cmds)
	if len(s.unknown) < replicas {
		b.Fatalf("%d unknown tasks, want %d", len(s.unknown), replicas)
	}
	tick := []Command{{Kind: CmdTick}}
	b.ResetTimer()
	for b.Loop() {
		s.nextDue = s.LastTime() + 1e6 // something else is due at every tick
		step(tick)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/tick")
}

// BenchmarkRetryWithManyWaiting is one pass over the tasks waiting for
// addresses after one address was freed: 12 services of 10,000 tasks on
// a network of 4,094 addresses, so about 116,000 wait. Each iteration
// deletes a pending task, which frees its address for the oldest waiting
// task, and queues a new task in its slot.
func BenchmarkRetryWithManyWaiting(b *testing.B) {
	s := New(Config{Group: 1})
	var out Output
	s.Apply([]Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.0.0.0/20"}}}, 1, 1e6, &out)
	// Every service gets its VIP before the tasks take the addresses.
	for _, n := range []uint32{0, 10000} {
		for i := range 12 {
			kind := CmdCreateService
			if n > 0 {
				kind = CmdUpdateService
			}
			s.Apply([]Command{{Kind: kind, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: n,
				Networks: []string{"net"}}}}, s.lastIndex+1, int64(s.lastIndex+1)*1e6, &out)
		}
	}
	var pending []*Task
	for _, id := range s.TaskIDs() {
		if t := s.tasks.get(id); t.Status.State == StatePending {
			pending = append(pending, t)
		}
	}
	waiting := s.waitingIDs() // oldest first: the next to be served
	if len(waiting) < 100000 || len(pending) < 4000 {
		b.Fatalf("%d tasks wait and %d are pending, want over 100,000 and 4,000", len(waiting), len(pending))
	}
	for i := 0; b.Loop(); i++ {
		t := pending[i%len(pending)]
		svc := s.services[t.Service]
		s.deleteTask(t, false)
		s.retryAllocation()
		served := s.tasks.get(waiting[0])
		if served.Status.State != StatePending {
			b.Fatalf("task %d is %s after the pass, want pending", served.ID, served.Status.State)
		}
		pending[i%len(pending)] = served
		waiting = append(waiting[1:], s.newTask(svc, t.Slot).ID)
	}
}

// BenchmarkTaskPage is one page of 10,000 task IDs from the middle of a
// group of 1,000,000 tasks (a client reading every task page by page).
func BenchmarkTaskPage(b *testing.B) {
	s := buildRunning(b, 100, 10000, 1000)
	ids := s.TaskIDs()
	after := ids[len(ids)/2]
	for b.Loop() {
		if page := s.TaskIDsAfter(after, 10000, nil); len(page) != 10000 || page[0] <= after {
			b.Fatalf("a page of %d IDs", len(page))
		}
	}
}

// BenchmarkWalkTasks walks 1,000,000 tasks in ID order, reading a field of
// each (the scheduler's scan): by TaskIDs then Task per ID, and by
// TasksInOrder.
func BenchmarkWalkTasks(b *testing.B) {
	s := buildRunning(b, 100, 10000, 1000)
	b.Run("ids-then-task", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for _, id := range s.TaskIDs() {
				n += int(s.Task(id).Slot)
			}
			runtime.KeepAlive(n)
		}
	})
	b.Run("in-order", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for t := range s.TasksInOrder() {
				n += int(t.Slot)
			}
			runtime.KeepAlive(n)
		}
	})
}

// BenchmarkApplyRamp applies a whole ramp the way a replica meets it: 100
// services of 1,000 replicas, each on a network of its own (a /20), created one
// per entry, then the tasks' assignments to 1,000 nodes and the agents'
// five reports each (accepted … running), in entries of 64 commands.
// µs/task (wall clock), cpu-µs/task (the process's CPU time, the
// collector's included) and allocs/task are the apply's cost per task from
// create to running, on one replica.
func BenchmarkApplyRamp(b *testing.B) {
	const services, replicas, nodes, entry = 100, 1000, 1000, 64
	var tasks, mallocs, bytes uint64
	var cpu time.Duration
	var ms runtime.MemStats
	b.ReportAllocs()
	b.StopTimer()
	for range b.N {
		s := New(Config{Group: 1})
		var out Output
		apply := func(cmds []Command) {
			for len(cmds) > 0 {
				n := min(len(cmds), entry)
				s.Apply(cmds[:n], s.LastIndex()+1, s.LastTime()+1e6, &out)
				for i, r := range out.Results {
					if r.Code != CodeOK {
						b.Fatalf("command %d (%s): %v", i, cmds[i].Kind, r.Err())
					}
				}
				cmds = cmds[n:]
			}
		}
		var cmds []Command
		for i := 1; i <= nodes; i++ {
			cmds = append(cmds, Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
		}
		for i := 1; i <= services; i++ {
			cmds = append(cmds, Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(i), Name: fmt.Sprintf("net-%d", i), Subnet: fmt.Sprintf("10.%d.0.0/20", i)}})
		}
		apply(cmds)
		measured := func(f func()) {
			runtime.ReadMemStats(&ms)
			before, beforeBytes := ms.Mallocs, ms.TotalAlloc
			cpuBefore := processCPU(b)
			b.StartTimer()
			f()
			b.StopTimer()
			cpu += processCPU(b) - cpuBefore
			runtime.ReadMemStats(&ms)
			mallocs += ms.Mallocs - before
			bytes += ms.TotalAlloc - beforeBytes
		}
		measured(func() {
			for i := 1; i <= services; i++ {
				apply([]Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: replicas,
					Networks: []string{fmt.Sprintf("net-%d", i)}}}})
			}
		})
		ids := s.TaskIDs()
		cmds = cmds[:0]
		for i, id := range ids {
			cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: NodeID(i%nodes + 1)})
		}
		reports := statusBatches(ids, nodes)
		measured(func() {
			apply(cmds)
			for _, batch := range reports {
				apply(batch)
			}
		})
		tasks += uint64(len(ids))
		if got := s.NumTasks(); got != services*replicas {
			b.Fatalf("%d tasks, want %d", got, services*replicas)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tasks)/1e3, "µs/task")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(tasks)/1e3, "cpu-µs/task")
	b.ReportMetric(float64(mallocs)/float64(tasks), "allocs/task")
	b.ReportMetric(float64(bytes)/float64(tasks), "B/task")
}

// processCPU is the CPU time the process used so far (user and system,
// every thread: the collector's too). On a machine others share, it moves
// less with their load than the wall clock does.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHeapPerNode measures live heap bytes per node in a state of
// 10,000 nodes labelled as the loadgen's simulated agents are (a zone of
// three and a common mark): a service group's mirror of a 10,000-agent
// fleet.
func BenchmarkHeapPerNode(b *testing.B) {
	const nodes = 10000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New(Config{Group: 1})
		var out Output
		var cmds []Command
		for i := 1; i <= nodes; i++ {
			cmds = append(cmds, Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("sim-%05d", i),
				Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%3), "shoal.sim": "sim"}}})
		}
		s.Apply(cmds, 1, 1e6, &out)
		cmds = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/nodes, "heap-bytes/node")
		runtime.KeepAlive(s)
	}
}

// liveProbe is a snapshot writer that measures the live heap (after a
// collection) as it is written to and keeps the largest.
type liveProbe struct {
	base, peak uint64
	n, next    int
}

func (p *liveProbe) Write(b []byte) (int, error) {
	p.n += len(b)
	if p.n < p.next {
		return len(b), nil
	}
	p.next = p.n + 1<<20 // a collection per megabyte written
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.HeapAlloc > p.base {
		p.peak = max(p.peak, m.HeapAlloc-p.base)
	}
	return len(b), nil
}

// BenchmarkSnapshotHeld1M measures the live heap a snapshot of a group
// of 1,000,000 tasks holds beyond the state while it is written: the
// whole canonical encoding captured and then compressed (what the engine
// did), against the stream (the engine's snapshot now).
func BenchmarkSnapshotHeld1M(b *testing.B) {
	s := buildRunning(b, 100, 10000, 1000)
	base := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.Run("canonical", func(b *testing.B) {
		for b.Loop() {
			p := &liveProbe{base: base()}
			canon := s.Canonical()
			if err := SaveCanonical(p, canon); err != nil {
				b.Fatal(err)
			}
			runtime.KeepAlive(canon)
			b.ReportMetric(float64(p.peak)/1e6, "MB-held")
			b.ReportMetric(float64(p.n), "snapshot-bytes")
		}
	})
	b.Run("stream", func(b *testing.B) {
		for b.Loop() {
			p := &liveProbe{base: base()}
			st := mustCapture(b, s)
			if err := SaveStream(p, st.Next); err != nil {
				b.Fatal(err)
			}
			st.Close()
			b.ReportMetric(float64(p.peak)/1e6, "MB-held")
			b.ReportMetric(float64(p.n), "snapshot-bytes")
		}
	})
}
