package manager

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/wire"
)

// A heartbeat that reaches the cluster's leader while its node monitor is
// not running (just elected, the monitor not started yet) is told to retry
// shortly there: never "not the leader" naming the leader itself, which
// the agent counts as a failed heartbeat and backs off from.
func TestLeaderWithoutItsMonitorAsksForARetry(t *testing.T) {
	m, ac, s := oneReplicaSession(t, 0)
	m.mon.StepDown() // the engine still says this replica leads
	_, err := ac.Heartbeat(ctxT(t), &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnavailable || we.RetryAfter <= 0 || we.Leader != "" {
		t.Fatalf("heartbeat at a leader whose monitor is not running: %v (%+v), want %s with a retry delay and no leader named",
			err, we, wire.CodeUnavailable)
	}
}

// A poll held by a follower is answered as soon as the cluster's leader
// changes, naming the new leader, long before the poll's wait ends: the
// agent's next heartbeat goes straight there instead of to the old one.
func TestPollNamesANewLeaderAtOnce(t *testing.T) {
	c := startThree(t)
	ctx := ctxT(t)
	old := c.leaderOf(0)
	follower := old%3 + 1
	ac, err := client.NewAgentClient([]string{c.ms[follower-1].APIAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s *wire.Session
	eventually(t, 10*time.Second, func() (bool, string) {
		s, err = ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "n1", CPU: 1000, Memory: 1 << 30}})
		return err == nil, fmt.Sprintf("open a session: %v", err)
	})
	full, err := ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	const wait = time.Minute
	got := make(chan *wire.Assignments, 1)
	go func() {
		a, err := ac.Assignments(context.Background(), &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID,
			Cursor: full.ResultsIn, Wait: int64(wait)})
		if err != nil {
			t.Error(err)
		}
		got <- a
	}()
	if err := c.ms[old-1].E.HandOver(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		now := c.leaderOf(0)
		if now == old || a == nil || a.Leader != c.ms[now-1].APIAddr {
			t.Fatalf("after the hand-over from replica %d to %d the poll named leader %q, want %q", old, now, a.Leader, c.ms[now-1].APIAddr)
		}
	case <-time.After(wait / 2):
		t.Fatalf("the poll was not answered within %s of the leader's hand-over", wait/2)
	}
}

// oneReplicaSession starts a one-replica manager (heartbeats at least
// minBeat apart) and opens an agent session on it; it returns the manager,
// the agent's client and the session, once a heartbeat on it succeeded.
func oneReplicaSession(t *testing.T, minBeat time.Duration) (*Manager, *client.AgentClient, *wire.Session) {
	t.Helper()
	m, err := Start(Options{DataDir: t.TempDir(), ReplicaID: 1, Groups: 1, RaftLogLevel: "critical",
		APIAddr: "127.0.0.1:0", MinHeartbeat: minBeat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := ctxT(t)
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	ac, err := client.NewAgentClient([]string{m.APIAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s *wire.Session
	eventually(t, 10*time.Second, func() (bool, string) {
		s, err = ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "n1", CPU: 1000, Memory: 1 << 30}})
		if err == nil {
			_, err = ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID})
		}
		return err == nil, fmt.Sprintf("open a session and heartbeat: %v", err)
	})
	return m, ac, s
}

// Without TLS, an agent's first session whose answer was lost and is asked
// again (of any manager) under the agent's key gives one node, not two; a
// first session without a key (an older agent) still gets a node of its
// own each time.
func TestFirstSessionAskedAgainGivesOneNode(t *testing.T) {
	m, ac, first := oneReplicaSession(t, 0)
	ctx := ctxT(t)
	desc := wire.NodeDescription{Hostname: "n2", CPU: 1000, Memory: 1 << 30}
	a, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: desc, Key: "k-7f3a"})
	if err != nil {
		t.Fatal(err)
	}
	// The answer is lost; the agent asks again with its key.
	b, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: desc, Key: "k-7f3a"})
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeID != b.NodeID || a.NodeID == first.NodeID {
		t.Fatalf("the same first session twice gave nodes %d and %d (the other agent has %d)", a.NodeID, b.NodeID, first.NodeID)
	}
	uc, err := client.New(m.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, err := uc.Nodes(ctx, nil)
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes after a first session asked twice: %+v, %v; want 2", nodes.Items, err)
	}
	c, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: desc})
	if err != nil || c.NodeID == a.NodeID {
		t.Fatalf("a keyless first session: node %d (%v), want a new node", c.NodeID, err)
	}
}
