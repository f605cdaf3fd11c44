package loadgen

import (
	"strconv"
	"testing"
	"time"

	"shoal/api/client"
)

// The statistics count each task once, record its latencies once, from
// the first rendering of each state, and forget it when it is deleted.
func TestStatsCountsEachTaskOnce(t *testing.T) {
	base := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	ev := func(id int, typ, state string, ms int) client.Event {
		e := client.Event{Topic: "task", Type: typ, Key: strconv.Itoa(id)}
		if state != "" {
			e.Task = &client.Task{ID: e.Key, State: state, Since: base.Add(time.Duration(ms) * time.Millisecond)}
		}
		return e
	}
	s := newStats(4)
	for _, e := range []client.Event{
		ev(1, "created", "pending", 1000),
		ev(1, "state", "pending", 1200), // a later rendering: the first one counts
		ev(1, "state", "assigned", 1500),
		ev(1, "state", "starting", 2000),
		ev(1, "state", "running", 3000),
		ev(1, "state", "shutdown", 9000), // after running: nothing more
		ev(2, "state", "accepted", 1000), // first seen past its creation
		ev(2, "state", "running", 4000),
		ev(3, "state", "", 0), // gone when rendered
		ev(4, "created", "pending", 1000),
		ev(4, "state", "rejected", 1100),
		ev(4, "deleted", "", 0),
		ev(4, "created", "pending", 5000), // seen again after its deletion
		ev(4, "state", "assigned", 5300),
		{Topic: "node", Type: "state", Key: "1"},
	} {
		s.event(e)
	}
	tr, seen := s.counts()
	if tr != 10 || seen != 4 {
		t.Fatalf("transitions %d, seen %d; want 10 and 4", tr, seen)
	}
	got := map[string][2]int64{} // name → count, max
	for _, l := range s.latencies() {
		got[l.Name] = [2]int64{l.Count, int64(l.Max)}
	}
	want := map[string][2]int64{"create_to_assigned": {2, 500}, "assigned_to_running": {1, 1500}, "create_to_running": {1, 2000}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: count and max %v, want %v", k, got[k], w)
		}
	}
}
