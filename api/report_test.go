package api

import (
	"fmt"
	"testing"
	"time"

	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// marks is a node monitor that records re-report marks.
type marks struct {
	beats
	marked []statemachine.NodeID
}

func (m *marks) MarkReReported(n statemachine.NodeID) bool {
	m.marked = append(m.marked, n)
	return true
}

// TestStatusEndpointWiring: the status endpoint decodes the batch, runs
// status submission (shoal/manager/control, tested there) on the server's
// submitter and node monitor, and encodes its answer; a re-report where
// the monitor does not run is answered not_leader, as a heartbeat is.
func TestStatusEndpointWiring(t *testing.T) {
	st := statemachine.New(statemachine.Config{Group: 1, Groups: 1})
	accepted := &wire.StatusAck{Results: []wire.ReportResult{wire.ReportAccepted, wire.ReportAccepted}, Messages: []string{"", ""}}
	for _, c := range []struct {
		name       string
		leader     uint64
		monitor    bool
		reReport   bool
		want       wire.Message
		wantMarked int
	}{
		{name: "plain batch on a follower", leader: 2, want: accepted},
		{name: "re-report on the leader", leader: 1, monitor: true, reReport: true, want: accepted, wantMarked: 1},
		{name: "re-report on a follower", leader: 2, monitor: true, reReport: true,
			want: &wire.Error{Code: wire.CodeNotLeader, RetryAfter: int64(200 * time.Millisecond),
				Message: "this manager does not lead the cluster; send heartbeats to the leader"}},
		{name: "re-report on a leader without a monitor", leader: 1, reReport: true, want: control.Starting()},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &replica{st: st, leader: c.leader}
			mon := &marks{}
			cfg := Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
				Feed: control.NewFeed(1, nil, 16, 16)}
			if c.monitor {
				cfg.Monitor = mon
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			status, got := postAgent(t, s, "/v1/agent/status", &wire.StatusBatch{NodeID: 5, ReReport: c.reReport, Reports: []wire.StatusReport{
				{Task: 1<<48 | 1, State: statemachine.StateRunning}, {Task: 1<<48 | 2, State: statemachine.StateFailed}}})
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
				t.Errorf("answer %d %+v; want %+v", status, got, c.want)
			}
			if len(mon.marked) != c.wantMarked {
				t.Errorf("marked %v, want %d marks", mon.marked, c.wantMarked)
			}
			wantCount := uint64(0)
			if _, ok := c.want.(*wire.StatusAck); ok {
				wantCount = 2
			}
			if n := s.metrics.reports.Get(); n != wantCount {
				t.Errorf("%d reports counted, want %d", n, wantCount)
			}
		})
	}
}
