package loadgen

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/loadgen/check"
)

// BenchmarkStreamChecksAndStats: a ramp's task events (200,000 tasks:
// pending, assigned, starting, running, each state's events in task
// order, as a ramp renders them) through the checker and the statistics,
// as the loadgen's stream reader hands them on; per event.
func BenchmarkStreamChecksAndStats(b *testing.B) {
	const n = 200000
	base := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	var evs []client.Event
	for k, st := range []string{"pending", "assigned", "starting", "running"} {
		for i := range n {
			node := uint32(i%1000 + 1)
			if st == "pending" {
				node = 0
			}
			id := strconv.Itoa(1688849860263936 + i)
			evs = append(evs, client.Event{Topic: "task", Type: "state", Key: id, Task: &client.Task{ID: id,
				Service: "svc-" + strconv.Itoa(i%100), Slot: uint32(i/100 + 1), Node: node, Desired: "running", State: st,
				Since:     base.Add(time.Duration(k*1000+i) * time.Microsecond),
				Addresses: []client.TaskAddress{{Network: "net-" + strconv.Itoa(i%100), Addr: fmt.Sprintf("10.%d.%d.%d/16", i%100, i/256%256, i%256)}}}})
		}
	}
	b.ResetTimer()
	cpu0 := cpuNs()
	for b.Loop() {
		c := check.New(base)
		c.Expect(n)
		s := newStats(n)
		c.OnTiming(s.timing)
		for _, ev := range evs {
			c.Event(ev, 1, base)
			s.event(ev)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N*len(evs)), "cpu-ns/event")
}

func cpuNs() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
