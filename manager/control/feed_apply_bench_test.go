package control

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"shoal/statemachine"
)

// rampEffects is what a service group's replica hands its feed in a ramp:
// the effects of each entry (copied out of the state's Output) of 1,000
// nodes' 100 tasks each, assigned in scheduler runs (tasks in ID order,
// nodes in turn) and reported accepted … running in agents' batches (one
// node's reports together), in entries of 512 commands. transitions is
// the number of commands applied.
func rampEffects(tb testing.TB) (effects [][]statemachine.Effect, transitions int) {
	const services, tasksPer, nodes, per = 50, 2000, 1000, 512
	s := statemachine.New(statemachine.Config{Group: 1})
	var out statemachine.Output
	index := uint64(0)
	apply := func(cmds []statemachine.Command, keep bool) {
		for len(cmds) > 0 {
			n := min(len(cmds), per)
			index++
			s.Apply(cmds[:n], index, int64(index)*1e6, &out)
			for i, r := range out.Results {
				if r.Code != statemachine.CodeOK {
					tb.Fatalf("command %d (%s): %v", i, cmds[i].Kind, r.Err())
				}
			}
			if keep {
				effects = append(effects, slices.Clone(out.Effects))
				transitions += n
			}
			cmds = cmds[n:]
		}
	}
	var cmds []statemachine.Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
	}
	for i := 1; i <= services; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{
			Name: fmt.Sprintf("svc-%d", i), Replicas: tasksPer}})
	}
	apply(cmds, false)
	ids := s.TaskIDs()
	node := func(i int) statemachine.NodeID { return statemachine.NodeID(i%nodes + 1) }
	cmds = cmds[:0]
	for i, id := range ids {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: node(i)})
	}
	apply(cmds, true)
	for _, st := range []statemachine.TaskState{statemachine.StateAccepted, statemachine.StatePreparing,
		statemachine.StateReady, statemachine.StateStarting, statemachine.StateRunning} {
		cmds = cmds[:0]
		for n := range nodes {
			for i := n; i < len(ids); i += nodes {
				cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: ids[i], Node: node(i), State: st})
			}
		}
		apply(cmds, true)
	}
	return effects, transitions
}

// BenchmarkFeedOnApply is a replica's feed (event ring and per-node
// journals, sized as manager.Start sizes them) fed a ramp's entries from a
// new feed, as a replica's feed fills in its first ramp: CPU (the
// process's, collector included), allocations and bytes per transition
// applied. Pair it with engine's BenchmarkReplicaApply for a replica's
// whole apply path.
func BenchmarkFeedOnApply(b *testing.B) {
	effects, transitions := rampEffects(b)
	for _, full := range []bool{false, true} {
		b.Run(map[bool]string{false: "new", true: "full"}[full], func(b *testing.B) {
			var (
				mallocs, bytes, total uint64
				cpu                   time.Duration
				ms                    runtime.MemStats
			)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				f := NewFeed(1, nil, 1<<20, 512)
				index := uint64(0)
				if full {
					// The ring full and every journal at its size, as a
					// replica's are after its first ramp.
					for len(f.mu.ring) < f.ringSize {
						for _, es := range effects {
							index++
							f.OnApply(1, index, es)
						}
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before, beforeBytes := ms.Mallocs, ms.TotalAlloc
				cpuBefore := cpuTime()
				b.StartTimer()
				for _, es := range effects {
					index++
					f.OnApply(1, index, es)
				}
				b.StopTimer()
				cpu += cpuTime() - cpuBefore
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - before
				bytes += ms.TotalAlloc - beforeBytes
				total += uint64(transitions)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/transition")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(total), "cpu-ns/transition")
			b.ReportMetric(float64(mallocs)/float64(total), "allocs/transition")
			b.ReportMetric(float64(bytes)/float64(total), "B/transition")
		})
	}
}
