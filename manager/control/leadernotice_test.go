package control

import (
	"context"
	"sync"
	"testing"
	"time"

	"shoal/cluster"
	"shoal/wire"
)

// movingSeat is a replica whose notices of the cluster group's leader
// follow a list, one value per LeaderNotice call (the last value repeats),
// each call's channel already closed: the leadership moving while a poll
// waits.
type movingSeat struct {
	mu      sync.Mutex
	notices []uint64
	calls   int
	armed   bool // the list starts with the parked poll; before, replica 1 leads
}

func (m *movingSeat) Leader(int) (uint64, bool) { return 1, true }
func (m *movingSeat) LeaderNotice(int) (uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	if !m.armed {
		return 1, ch
	}
	close(ch)
	v := m.notices[min(m.calls, len(m.notices)-1)]
	m.calls++
	return v, ch
}
func (m *movingSeat) Contact(int) cluster.Contact { return cluster.Contact{OK: true} }

// A poll answered because the leader changed names that leader, even when
// the leadership moved on by the time the answer is written (a hand-over
// in progress: the follower knows no leader for a moment). It named nobody
// before, and the agent's next heartbeat went to the old leader.
func TestPollAnsweredByALeaderChangeNamesIt(t *testing.T) {
	a := agentsOver(t, 1, beat{ttl: time.Minute, period: time.Second})
	seat := &movingSeat{notices: []uint64{1, 2, 0}} // started, the change, at the answer
	a.stream.leaders = seat
	ctx := context.Background()
	s, err := a.OpenSession(ctx, &wire.SessionRequest{Key: "k1", Node: wire.NodeDescription{Hostname: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	full, err := a.Assignments(ctx, &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	seat.mu.Lock()
	seat.armed = true
	seat.mu.Unlock()
	got, err := a.Assignments(ctx, &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID, Cursor: full.ResultsIn, Wait: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Leader != "m2:7700" {
		t.Fatalf("the poll answered by the leader's change to replica 2 named %q, want m2:7700", got.Leader)
	}
}
