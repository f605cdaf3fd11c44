package engine

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"shoal/statemachine"
)

// BenchmarkReadBarrier: linearizable reads (Engine.Read, the read-index
// barrier every COMPLETE assignments answer takes in every service group)
// on a follower of a three-replica cluster with four groups, from one
// reader and from many at once (thousands of agents resyncing after a
// failover or a join storm). cpu-ns/op is the process's CPU (all three
// replicas, the collector included) per read; on a shared machine it moves
// less with others' load than ns/op does.
func BenchmarkReadBarrier(b *testing.B) {
	const groups = 4
	l := startLocal(b, 3, testConfig(groups))
	var follower *Engine
	for _, e := range l.Engines() {
		if id, ok := e.Leader(1); ok && id != e.cfg.ReplicaID {
			follower = e
			break
		}
	}
	if follower == nil {
		b.Fatal("no follower of group 1")
	}
	noop := func(*statemachine.State) {}
	for _, readers := range []int{1, 64} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, readers/2)) // GOMAXPROCS is 2 here
			cpu0 := benchCPU(b)
			b.ResetTimer()
			if readers == 1 {
				for i := 0; b.Loop(); i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					if err := follower.Read(ctx, 1+i%groups, noop); err != nil {
						b.Fatal(err)
					}
					cancel()
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for i := 0; pb.Next(); i++ {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						if err := follower.Read(ctx, 1+i%groups, noop); err != nil {
							b.Error(err)
							cancel()
							return
						}
						cancel()
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64((benchCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchCPU is the CPU time this process used so far (user and system).
func benchCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
