package loadgen

import (
	"slices"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/loadgen/workload"
)

// Every drawn ID lies among its service's consecutive first replicas, none
// twice, each service's share follows its replicas, and a seed replays.
func TestSampleIDsStayWithinEachServicesReplicas(t *testing.T) {
	svcs := []workload.Service{{Name: "a", Replicas: 1000}, {Name: "b", Replicas: 3000}, {Name: "c", Replicas: 5}, {Name: "gone", Replicas: 10}}
	first := map[string]uint64{"a": 1 << 48, "b": 2<<48 + 77, "c": 3 << 48}
	got := sampleIDs(7, svcs, first, 400)
	if len(got["gone"]) != 0 {
		t.Fatalf("a service without a first task was sampled: %v", got["gone"])
	}
	for _, s := range svcs[:3] {
		ids := got[s.Name]
		want := max(1, 400*s.Replicas/4015)
		if len(ids) != min(want, s.Replicas) {
			t.Fatalf("%s: %d IDs drawn, want %d", s.Name, len(ids), min(want, s.Replicas))
		}
		seen := map[uint64]bool{}
		for _, id := range ids {
			if id < first[s.Name] || id >= first[s.Name]+uint64(s.Replicas) || seen[id] {
				t.Fatalf("%s: ID %d outside [%d, %d) or drawn twice", s.Name, id, first[s.Name], first[s.Name]+uint64(s.Replicas))
			}
			seen[id] = true
		}
	}
	again := sampleIDs(7, svcs, first, 400)
	for k := range got {
		if !slices.Equal(got[k], again[k]) {
			t.Fatalf("the same seed drew other IDs for %s", k)
		}
	}
}

func TestTimingOfReadsTheFirstTransitions(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	task := client.Task{History: []client.HistoryEntry{
		{At: at(0), Kind: "transition", State: "new"},
		{At: at(5), Kind: "transition", State: "pending"},
		{At: at(40), Kind: "desired", State: "pending", Desired: "running"},
		{At: at(120), Kind: "transition", State: "assigned"},
		{At: at(900), Kind: "transition", State: "running"},
	}}
	tm := timingOf(task)
	if tm.created != at(0).UnixMilli() || tm.assigned != at(120).UnixMilli() || tm.running != at(900).UnixMilli() {
		t.Fatalf("timing %+v", tm)
	}
	s := newLatencySample()
	s.add(tm)
	s.add(timingOf(client.Task{History: task.History[:4]})) // not running yet: read, not used
	if s.read != 2 || s.used != 1 || s.c2r.Max() != 900 || s.c2a.Max() != 120 || s.a2r.Max() != 780 {
		t.Fatalf("sample read %d used %d: c2r %d c2a %d a2r %d", s.read, s.used, s.c2r.Max(), s.c2a.Max(), s.a2r.Max())
	}
}
