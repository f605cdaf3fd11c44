package sched

import (
	"fmt"
	"testing"
)

// benchCluster builds the benchmark cluster: nodes nodes in 10 zones
// (label zone=z0..z9), half of them labelled disk=ssd, each with 64 cores
// and 256 GiB.
func benchCluster(nodes int) *Table {
	tb := NewTable()
	for i := range nodes {
		n := Node{
			ID: uint32(i + 1), Hostname: fmt.Sprintf("node-%05d", i), Status: StatusReady,
			CPU: 64_000, Mem: 256 << 30,
			Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%10)},
		}
		if i%2 == 0 {
			n.Labels["disk"] = "ssd"
		} else {
			n.Labels["disk"] = "hdd"
		}
		tb.UpsertNode(n)
	}
	return tb
}

// benchGroup is count tasks of one service, 100 milli-cores and 128 MiB
// each, on ssd nodes, spread over zones.
func benchGroup(count int) Request {
	return Request{
		Service: 1, Count: count, CPU: 100, Mem: 128 << 20,
		Constraints: MustParseConstraints("node.labels.disk==ssd"),
		Preferences: []string{"node.labels.zone"},
	}
}

func benchPlace(b *testing.B, count int) { benchPlaceRequest(b, benchGroup(count)) }

func benchPlaceRequest(b *testing.B, g Request) {
	count := g.Count
	base := benchCluster(10_000)
	tb := base.Clone()
	// Warm the scratch buffers once, as a long-lived scheduler would.
	if p, err := tb.Place(g, 1); err != nil || p.Placed != count {
		b.Fatalf("placed %d of %d: %v", p.Placed, count, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		tb.reset(base)
		b.StartTimer()
		p, err := tb.Place(g, 1)
		if err != nil || p.Placed != count {
			b.Fatalf("placed %d of %d: %v", p.Placed, count, err)
		}
	}
	b.ReportMetric(float64(count)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// reset makes t's reservations and counts equal to base's again (base has
// the same nodes in the same rows), keeping t's scratch buffers warm.
func (t *Table) reset(base *Table) {
	copy(t.cpuRes, base.cpuRes)
	copy(t.memRes, base.memRes)
	copy(t.total, base.total)
	clear(t.services)
	for s, col := range base.services {
		t.services[s] = &serviceColumn{count: append([]uint32(nil), col.count...), tasks: col.tasks}
	}
}

func BenchmarkPlace100kTasks10kNodes(b *testing.B) { benchPlace(b, 100_000) }

func BenchmarkPlace1MTasks10kNodes(b *testing.B) { benchPlace(b, 1_000_000) }

// BenchmarkPlace100kTasks10kNodesAvoid is BenchmarkPlace100kTasks10kNodes
// with 100 of the 5,000 ssd nodes avoided (the others take every task).
func BenchmarkPlace100kTasks10kNodesAvoid(b *testing.B) {
	g := benchGroup(100_000)
	for i := range 100 {
		g.Avoid = append(g.Avoid, uint32(2*i*50+1)) // rows 0, 100, ...: ssd nodes in every zone
	}
	benchPlaceRequest(b, g)
}

// BenchmarkPlace100kTasks10kNodesAvoidNeeded: 20 tasks per node fill the
// 5,000 ssd nodes exactly, so the 2,000 tasks the 100 avoided nodes do not
// take in the first pass go to them in the second.
func BenchmarkPlace100kTasks10kNodesAvoidNeeded(b *testing.B) {
	g := benchGroup(100_000)
	g.MaxPerNode = 20
	for i := range 100 {
		g.Avoid = append(g.Avoid, uint32(2*i*50+1))
	}
	benchPlaceRequest(b, g)
}

// BenchmarkPlace100kTasks10kNodesNoPrefs is the same without the zone
// preference: one water-fill over all 5,000 ssd nodes.
func BenchmarkPlace100kTasks10kNodesNoPrefs(b *testing.B) {
	base := benchCluster(10_000)
	g := benchGroup(100_000)
	g.Preferences = nil
	tb := base.Clone()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		tb.reset(base)
		b.StartTimer()
		if p, _ := tb.Place(g, 1); p.Placed != g.Count {
			b.Fatalf("placed %d", p.Placed)
		}
	}
}

// TestPlaceAllocations guards the hot path: after warm-up, a placement
// allocates a few objects (roaring containers, one per 65,536 rows, and an
// iterator), never one per node or per task.
func TestPlaceAllocations(t *testing.T) {
	var allocs []float64
	for _, nodes := range []int{1_000, 20_000} {
		tb := benchCluster(nodes)
		g := benchGroup(nodes)
		tb.Place(g, 1) // warm the scratch buffers and the service column
		allocs = append(allocs, testing.AllocsPerRun(20, func() { tb.Place(g, 2) }))
	}
	if allocs[0] > 10 || allocs[1] > 10 {
		t.Errorf("allocations per Place for 1k and 20k nodes: %v; want ≤ 10 whatever the node count", allocs)
	}
}

// BenchmarkPlace1kTasksOfANewService10kNodes: a ramp's usual batch: 1,000
// tasks of a service with none placed yet, on 10,000 nodes, no
// preferences: every filtered node has room and the same count of the
// service's tasks (none), so the tasks go to the first 1,000 in tie order.
func BenchmarkPlace1kTasksOfANewService10kNodes(b *testing.B) {
	benchPlaceRequest(b, Request{Service: 1, Count: 1000, CPU: 100, Mem: 128 << 20})
}
