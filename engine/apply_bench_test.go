package engine

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"shoal/statemachine"
)

// BenchmarkReplicaApply is one replica's cost per committed transition on
// the path from the log entry's bytes to its effects handed to OnApply:
// decoding the entry, applying it (statemachine.ApplyEntry), encoding the
// results for the proposer. Shape: 1,000 nodes, 50 services of 1,000 tasks
// each on a /20 network of its own; the tasks' assignments and the
// agents' five reports each (accepted … running), in entries of 512
// commands (untimed: building the state and encoding the entries). The
// OnApply hook only counts effects (manager/control's
// BenchmarkFeedOnApply prices the feed). cpu-ns/transition is the
// process's CPU (collector included) per transition applied;
// allocs/transition and B/transition are the heap's.
func BenchmarkReplicaApply(b *testing.B) {
	const services, tasksPer, nodes, per = 50, 1000, 1000, 512
	var (
		transitions, mallocs, bytes uint64
		cpu                         time.Duration
		ms                          runtime.MemStats
	)
	b.ReportAllocs()
	b.StopTimer()
	for range b.N {
		effects := 0
		r := newReplica(1, 1, func(_ int, _ uint64, es []statemachine.Effect) { effects += len(es) })
		index, now := uint64(0), int64(1e9)
		entries := func(cmds []statemachine.Command) []sm.Entry {
			var ents []sm.Entry
			for len(cmds) > 0 {
				n := min(len(cmds), per)
				index, now = index+1, now+1e6
				ents = append(ents, sm.Entry{Index: index, Cmd: encodeEntry(entryStamp{now: now}, cmds[:n], 0)})
				cmds = cmds[n:]
			}
			return ents
		}
		apply := func(ents []sm.Entry) {
			if _, err := r.Update(ents); err != nil {
				b.Fatal(err)
			}
			for _, e := range ents {
				rs, err := statemachine.DecodeResults(e.Result.Data)
				if err != nil {
					b.Fatal(err)
				}
				for i, res := range rs {
					if res.Code != statemachine.CodeOK {
						b.Fatalf("entry %d command %d: %v", e.Index, i, res.Err())
					}
				}
			}
		}
		var cmds []statemachine.Command
		for i := 1; i <= nodes; i++ {
			cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode,
				NodeSpec: &statemachine.Node{ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
		}
		for i := 1; i <= services; i++ {
			cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdCreateNetwork, NetworkSpec: &statemachine.Network{
				ID: statemachine.NetworkID(i), Name: fmt.Sprintf("net-%d", i), Subnet: fmt.Sprintf("10.%d.0.0/20", i)}})
		}
		for i := 1; i <= services; i++ {
			cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{
				Name: fmt.Sprintf("svc-%d", i), Replicas: tasksPer, Networks: []string{fmt.Sprintf("net-%d", i)}}})
		}
		for _, c := range cmds {
			apply(entries([]statemachine.Command{c}))
		}
		ids := r.mu.st.TaskIDs()
		if len(ids) != services*tasksPer {
			b.Fatalf("%d tasks, want %d", len(ids), services*tasksPer)
		}
		cmds = cmds[:0]
		for i, id := range ids {
			cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: statemachine.NodeID(i%nodes + 1)})
		}
		for _, st := range []statemachine.TaskState{statemachine.StateAccepted, statemachine.StatePreparing,
			statemachine.StateReady, statemachine.StateStarting, statemachine.StateRunning} {
			for i, id := range ids {
				cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id,
					Node: statemachine.NodeID(i%nodes + 1), State: st})
			}
		}
		ents := entries(cmds)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before, beforeBytes := ms.Mallocs, ms.TotalAlloc
		cpuBefore := processCPU(b)
		b.StartTimer()
		for i := range ents {
			if _, err := r.Update(ents[i : i+1]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cpu += processCPU(b) - cpuBefore
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		bytes += ms.TotalAlloc - beforeBytes
		transitions += uint64(len(cmds))
		for _, e := range ents {
			rs, err := statemachine.DecodeResults(e.Result.Data)
			if err != nil || len(rs) != int(e.Result.Value) {
				b.Fatalf("entry %d: %d results of %d, %v", e.Index, len(rs), e.Result.Value, err)
			}
			for i, res := range rs {
				if res.Code != statemachine.CodeOK {
					b.Fatalf("entry %d command %d: %v", e.Index, i, res.Err())
				}
			}
		}
		if effects == 0 {
			b.Fatal("no effects")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(transitions), "ns/transition")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(transitions), "cpu-ns/transition")
	b.ReportMetric(float64(mallocs)/float64(transitions), "allocs/transition")
	b.ReportMetric(float64(bytes)/float64(transitions), "B/transition")
}

// processCPU is the CPU time the process used so far (user and system,
// every thread: the collector's too).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
