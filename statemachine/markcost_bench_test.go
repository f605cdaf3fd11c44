package statemachine

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
)

// BenchmarkMarkPerTask measures what a replica's tasks cost the garbage
// collector: a state of 200,000 running tasks (100 services of 2,000
// replicas, each on a network of its own, as the loadgen's ramp makes
// them) on 1,000 nodes, then full collections with nothing else live.
// heap-objects/task is what each collection marks per task (objects the
// state holds, the fixed part of the state divided in); gc-cpu-ns/task is
// the collector's CPU for one full collection (runtime/metrics), per task.
// The collector runs once per heap's worth allocated, so its share of a
// replica's CPU in a ramp moves with the second figure.
func BenchmarkMarkPerTask(b *testing.B) {
	const services, replicas, nodes = 100, 2000, 1000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := New(Config{Group: 1})
	var out Output
	apply := func(cmds []Command) {
		for len(cmds) > 0 {
			n := min(len(cmds), 1000)
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
	for i := 1; i <= services; i++ {
		apply([]Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: replicas,
			Networks: []string{fmt.Sprintf("net-%d", i)}}}})
	}
	ids := s.TaskIDs()
	cmds = cmds[:0]
	for i, id := range ids {
		cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: NodeID(i%nodes + 1)})
	}
	apply(cmds)
	for _, batch := range statusBatches(ids, nodes) {
		apply(batch)
	}
	if got := s.NumTasks(); got != services*replicas {
		b.Fatalf("%d tasks, want %d", got, services*replicas)
	}
	out = Output{}
	runtime.GC()
	runtime.ReadMemStats(&after)
	tasks := float64(s.NumTasks())
	sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(sample)
	gcBefore := sample[0].Value.Float64()
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
	}
	b.StopTimer()
	metrics.Read(sample)
	gc := sample[0].Value.Float64() - gcBefore
	b.ReportMetric(float64(after.HeapObjects-before.HeapObjects)/tasks, "heap-objects/task")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/tasks, "heap-bytes/task")
	b.ReportMetric(gc*1e9/float64(b.N)/tasks, "gc-cpu-ns/task")
	runtime.KeepAlive(s)
}

// A running task of a service on one network is at most two objects for
// the collector (itself with its attachment, and its slot) whether its
// state was built by Apply, loaded from a snapshot or cloned: each object
// is marked at every collection, and they were four (the slot's task
// array and the attachment's array on their own).
func TestTaskObjectsPerRunningTask(t *testing.T) {
	const services, replicas, nodes = 5, 1000, 50
	build := func() *State {
		s := New(Config{Group: 1})
		var out Output
		apply := func(cmds ...Command) {
			mustApply(t, s, &out, cmds...)
		}
		for i := 1; i <= nodes; i++ {
			apply(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
		}
		for i := 1; i <= services; i++ {
			apply(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(i), Name: fmt.Sprintf("net-%d", i), Subnet: fmt.Sprintf("10.%d.0.0/20", i)}})
			apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: replicas,
				Networks: []string{fmt.Sprintf("net-%d", i)}}})
		}
		ids := s.TaskIDs()
		var cmds []Command
		for i, id := range ids {
			cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: NodeID(i%nodes + 1)})
		}
		apply(cmds...)
		for _, batch := range statusBatches(ids, nodes) {
			apply(batch...)
		}
		return s
	}
	objects := func(make func() *State) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := make()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.NumTasks() != services*replicas {
			t.Fatalf("%d tasks", s.NumTasks())
		}
		n := float64(after.HeapObjects-before.HeapObjects) / float64(s.NumTasks())
		runtime.KeepAlive(s)
		return n
	}
	live := build()
	snap := live.Canonical()
	for _, c := range []struct {
		name string
		make func() *State
	}{
		{"applied", build},
		{"loaded", func() *State {
			s, err := FromCanonical(snap)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"cloned", live.Clone},
	} {
		// The fixed part (nodes, services, pools, indexes) comes to a
		// small fraction of an object per task at this size.
		if n := objects(c.make); n > 2.5 {
			t.Errorf("%s: %.2f heap objects per running task, want at most 2.5 (a task with its attachment, its slot)", c.name, n)
		} else {
			t.Logf("%s: %.2f heap objects per running task", c.name, n)
		}
	}
}
