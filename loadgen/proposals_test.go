package loadgen

import (
	"slices"
	"testing"

	"shoal/loadgen/report"
)

// The totals are what the replicas proposed while the loadgen watched: the
// growth of each replica's counters, and after a restart (counters below
// the last reading) everything the new process counted.
func TestProposalCountsAcrossRestarts(t *testing.T) {
	p := newProposalCounts()
	d := map[int]uint64{}
	p.add(1, map[string]uint64{"0": 10, "1": 100}, map[string]uint64{"0": 10, "1": 400}, d) // first reading: counted
	p.add(2, map[string]uint64{"1": 50}, map[string]uint64{"1": 100}, d)
	d = map[int]uint64{}
	p.add(1, map[string]uint64{"0": 15, "1": 130}, map[string]uint64{"0": 15, "1": 520}, d)
	p.add(2, map[string]uint64{"1": 7}, map[string]uint64{"1": 21}, d) // replica 2 restarted
	if d[1] != 30+7 || d[0] != 5 {
		t.Errorf("deltas %v, want group 0: 5, group 1: 37", d)
	}
	p.terms(map[string]uint64{"0": 3, "1": 2})
	p.terms(map[string]uint64{"1": 5})
	p.terms(map[string]uint64{"1": 4}) // a replica behind: the highest counts
	p.peak(d, 0.5)
	got := p.report(10)
	if len(got) != 2 || got[0].Group != 0 || got[1].Group != 1 {
		t.Fatalf("groups %+v", got)
	}
	g := got[1]
	if g.Proposals != 130+50+7 || g.Commands != 520+100+21 {
		t.Errorf("group 1: %d proposals, %d commands; want 187, 641", g.Proposals, g.Commands)
	}
	if got[0].Elections != 0 || g.Elections != 3 {
		t.Errorf("elections: group 0 %d, group 1 %d; want 0, 3 (terms 2 → 5)", got[0].Elections, g.Elections)
	}
	if g.PerSecond != 18.7 || g.PeakRate != 74 || g.MeanBatch != 641.0/187 {
		t.Errorf("group 1 rates %+v", g)
	}
}

// Agent calls add up each replica's growth per endpoint; a replica whose
// counter went down restarted, and all of its new reading counts.
func TestAgentCallsAddEachReplicasGrowth(t *testing.T) {
	a := newAgentCalls()
	a.add(1, map[string]uint64{"heartbeat": 100, "assignments": 10})
	a.add(2, map[string]uint64{"heartbeat": 5})
	a.add(1, map[string]uint64{"heartbeat": 160, "assignments": 12})
	a.add(2, map[string]uint64{"heartbeat": 3}) // restarted
	got := a.report(2, 120)
	want := []report.AgentCalls{
		{Endpoint: "assignments", Total: 12, PerAgentPerMinute: 3},
		{Endpoint: "heartbeat", Total: 168, PerAgentPerMinute: 42},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("agent calls %+v, want %+v", got, want)
	}
}
