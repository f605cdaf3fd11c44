package check

import (
	"fmt"
	"syscall"
	"testing"
)

// BenchmarkAgentsObservations: what the agents tell of a ramp and its
// end, 200,000 tasks on 1,000 nodes with one address each: every task
// handed, then held, then released; per observation.
func BenchmarkAgentsObservations(b *testing.B) {
	const n = 200000
	nets := make([]string, n)
	addrs := make([]string, n)
	for i := range n {
		nets[i] = fmt.Sprintf("net-%d", i%100)
		addrs[i] = fmt.Sprintf("10.%d.%d.%d/16", i%100, i/256%256, i%256)
	}
	b.ResetTimer()
	cpu0 := cpuNs()
	for b.Loop() {
		c := New(t0)
		c.Expect(n)
		for i := range n {
			c.Handed(uint32(i%1000+1), uint64(1688849860263936+i), t0)
		}
		for i := range n {
			c.Hold(uint32(i%1000+1), uint64(1688849860263936+i), nets[i:i+1], addrs[i:i+1], t0)
		}
		for i := range n {
			c.Release(uint64(1688849860263936+i), t0)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*3*n), "ns/obs")
	b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N*3*n), "cpu-ns/obs")
}

func cpuNs() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
