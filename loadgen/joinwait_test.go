package loadgen

import (
	"testing"
	"time"
)

// The wait for the agents goes on as long as agents keep joining, ends when
// every one joined, and gives up only after stall without progress: a new
// most of agents holding a session or of the cluster's nodes (a count that
// dips and comes back to its best is no progress; nodes still being
// created while sessions lapse are).
func TestJoinWatchWaitsWhileAgentsJoin(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		s             float64
		joined, nodes int
		want          joinVerdict
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"slow but steady joins past a minute", []step{
			{0, 0, -1, joinWaiting}, {25, 100, -1, joinWaiting}, {50, 2000, -1, joinWaiting}, {75, 3000, -1, joinWaiting},
			{100, 9999, -1, joinWaiting}, {129, 9999, -1, joinWaiting}, {130, 10000, -1, joinAll}}},
		{"none joins at all", []step{{0, 0, -1, joinWaiting}, {29.9, 0, -1, joinWaiting}, {30, 0, -1, joinStalled}}},
		{"stalls short of all", []step{{0, 0, -1, joinWaiting}, {10, 9990, -1, joinWaiting}, {39, 9990, -1, joinWaiting}, {40, 9990, -1, joinStalled}}},
		{"a dip is no progress", []step{{0, 0, -1, joinWaiting}, {10, 9000, -1, joinWaiting}, {20, 8000, -1, joinWaiting},
			{35, 9000, -1, joinWaiting}, {40, 8999, -1, joinStalled}}},
		{"every agent at once", []step{{0, 10000, -1, joinAll}}},
		{"sessions lapse while joins go on", []step{{0, 0, 0, joinWaiting}, {10, 3000, 3500, joinWaiting},
			{20, 2000, 4000, joinWaiting}, {45, 2500, 5000, joinWaiting}, {70, 3000, 6000, joinWaiting},
			{99, 2900, 6000, joinWaiting}, {100, 3000, 6000, joinStalled}}},
	}
	for _, c := range cases {
		w := newJoinWatch(10000, 30*time.Second, t0)
		for _, st := range c.steps {
			if got := w.observe(at(st.s), st.joined, st.nodes); got != st.want {
				t.Errorf("%s: %d joined at %.1fs: verdict %d, want %d", c.name, st.joined, st.s, got, st.want)
			}
		}
	}
}
