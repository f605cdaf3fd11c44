package loadgen

import (
	"testing"
	"time"
)

// The wait for the agents goes on as long as agents keep joining, ends when
// every one joined, and gives up only after stall without a new one (a
// count that dips and comes back to its best is no progress).
func TestJoinWatchWaitsWhileAgentsJoin(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		s      float64
		joined int
		want   joinVerdict
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"slow but steady joins past a minute", []step{
			{0, 0, joinWaiting}, {25, 100, joinWaiting}, {50, 2000, joinWaiting}, {75, 3000, joinWaiting},
			{100, 9999, joinWaiting}, {129, 9999, joinWaiting}, {130, 10000, joinAll}}},
		{"none joins at all", []step{{0, 0, joinWaiting}, {29.9, 0, joinWaiting}, {30, 0, joinStalled}}},
		{"stalls short of all", []step{{0, 0, joinWaiting}, {10, 9990, joinWaiting}, {39, 9990, joinWaiting}, {40, 9990, joinStalled}}},
		{"a dip is no progress", []step{{0, 0, joinWaiting}, {10, 9000, joinWaiting}, {20, 8000, joinWaiting},
			{35, 9000, joinWaiting}, {40, 8999, joinStalled}}},
		{"every agent at once", []step{{0, 10000, joinAll}}},
	}
	for _, c := range cases {
		w := newJoinWatch(10000, 30*time.Second, t0)
		for _, st := range c.steps {
			if got := w.observe(at(st.s), st.joined); got != st.want {
				t.Errorf("%s: %d joined at %.1fs: verdict %d, want %d", c.name, st.joined, st.s, got, st.want)
			}
		}
	}
}
