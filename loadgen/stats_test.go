package loadgen

import (
	"strconv"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/loadgen/check"
)

// The statistics count each task once, record its latencies once, from
// the first rendering of each state, and forget it when it is deleted
// (each task's timing kept in the checker's view of it).
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
	c := check.New(base)
	c.OnTiming(s.timing)
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
		c.Event(e, 1, base)
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

// A resync replaces the checker's view; the statistics keep the timing of
// every task it lists again (a task created before it and running after
// it has its create-to-running latency), and do not count it again.
func TestStatsKeepTimingOverAResync(t *testing.T) {
	base := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	task := func(state string, ms int) *client.Task {
		return &client.Task{ID: "7", Service: "web", Node: 3, State: state, Since: base.Add(time.Duration(ms) * time.Millisecond)}
	}
	s := newStats(1)
	c := check.New(base)
	c.OnTiming(s.timing)
	c.Event(client.Event{Topic: "task", Type: "created", Key: "7", Task: task("pending", 1000)}, 1, base)
	c.Reset([]client.Task{*task("assigned", 1500)}, 2, base)
	c.Event(client.Event{Topic: "task", Type: "state", Key: "7", Task: task("running", 4000)}, 3, base)
	if _, seen := s.counts(); seen != 1 {
		t.Errorf("seen %d tasks, want 1", seen)
	}
	for _, l := range s.latencies() {
		if l.Name == "create_to_running" && (l.Count != 1 || l.Max < 2990 || l.Max > 3010) { // the histogram's precision
			t.Errorf("create to running: %d recorded, max %v ms; want 1 of 3000", l.Count, l.Max)
		}
	}
}
