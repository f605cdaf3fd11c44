package engine

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"shoal/statemachine"
)

// A replica that was away catches up from its leader's log in Replicate
// messages of at most MaxReplicateBytes of entries (plus the one entry
// that may overshoot it), not in one message holding everything it missed
// — which its leader would also send again at every heartbeat response
// until the replica acknowledged it.
func TestCatchUpMessagesAreBounded(t *testing.T) {
	var mu sync.Mutex
	var largest, total, messages int
	testSent = func(b *pb.MessageBatch) {
		for i := range b.Requests {
			m := &b.Requests[i]
			if m.Type != pb.Replicate || m.To != 3 || len(m.Entries) == 0 {
				continue
			}
			n := 0
			for j := range m.Entries {
				n += len(m.Entries[j].Cmd)
			}
			mu.Lock()
			largest, total, messages = max(largest, n), total+n, messages+1
			mu.Unlock()
		}
	}
	t.Cleanup(func() { testSent = nil })

	cfg := testConfig(1)
	// No snapshot in the way: replica 3 catches up from the log.
	cfg.SnapshotEntries, cfg.CompactionOverhead = 1<<20, 1<<20
	l := startLocal(t, 3, cfg)
	e := l.Engine(1)
	l.Stop(3)
	waitLeaderAmong(t, []*Engine{l.Engine(1), l.Engine(2)}, 1, 2)
	// About 12 MiB of log while replica 3 is away.
	env := []string{"PAD=" + strings.Repeat("x", 16<<10)}
	var cmds []statemachine.Command
	for i := range 768 {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: fmt.Sprintf("big-%d", i), Image: "busybox", Env: env}})
	}
	submitAll(t, e, cmds)
	mu.Lock()
	largest, total, messages = 0, 0, 0
	mu.Unlock()
	if err := l.Restart(3); err != nil {
		t.Fatal(err)
	}
	converged(t, l.Engines())

	mu.Lock()
	defer mu.Unlock()
	t.Logf("catch-up: %d Replicate messages to replica 3, %d bytes of entries, the largest %d", messages, total, largest)
	if limit := MaxReplicateBytes + testConfig(1).withDefaults().MaxBatchBytes + 64<<10; largest > limit {
		t.Fatalf("a Replicate message carried %d bytes of entries, more than %d", largest, limit)
	}
	if total < 12<<20 {
		t.Fatalf("replica 3 was sent only %d bytes of entries: it did not catch up from the log", total)
	}
}

// BenchmarkCatchUpHeap measures the heap while a replica that missed 48 MiB
// of log catches up from it (three replicas in one process, so the
// leader's and the follower's buffers add up): peak-heap-MB is the most
// heap in use seen, sampled every 5 ms, above what was in use before the
// restart.
func BenchmarkCatchUpHeap(b *testing.B) {
	for range b.N {
		cfg := testConfig(1)
		cfg.SnapshotEntries, cfg.CompactionOverhead = 1<<20, 1<<20
		l := startLocal(b, 3, cfg)
		l.Stop(3)
		waitLeaderAmong(b, []*Engine{l.Engine(1), l.Engine(2)}, 1, 2)
		env := []string{"PAD=" + strings.Repeat("x", 64<<10)}
		var cmds []statemachine.Command
		for i := range 768 {
			cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdCreateService,
				Spec: &statemachine.ServiceSpec{Name: fmt.Sprintf("big-%d", i), Image: "busybox", Env: env}})
		}
		submitAll(b, l.Engine(1), cmds)
		cmds = nil
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var peak atomic.Uint64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}()
		start := time.Now()
		if err := l.Restart(3); err != nil {
			b.Fatal(err)
		}
		converged(b, l.Engines())
		took := time.Since(start)
		close(stop)
		<-done
		b.ReportMetric(float64(peak.Load()-min(base, peak.Load()))/(1<<20), "peak-heap-MB")
		b.ReportMetric(took.Seconds(), "catch-up-s")
		l.Close()
	}
}
