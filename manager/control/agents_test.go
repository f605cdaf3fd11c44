package control

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"shoal/cluster"
	"shoal/engine/duty"
	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// seat is this replica (1) as the agent protocol sees it: who leads the
// cluster group, in contact with its quorum.
type seat struct{ leader uint64 }

func (s seat) Leader(int) (uint64, bool)                  { return s.leader, s.leader != 0 }
func (s seat) LeaderNotice(int) (uint64, <-chan struct{}) { return s.leader, nil }
func (s seat) Contact(int) cluster.Contact                { return cluster.Contact{Leading: s.leader == 1, OK: true} }
func (s seat) ReplicaID() uint64                          { return 1 }
func (s seat) Leading() bool                              { return s.leader == 1 }

// beat is a node monitor that answers every heartbeat alike.
type beat struct {
	ttl    time.Duration
	err    error
	period time.Duration
}

func (b beat) Heartbeat(context.Context, sm.NodeID, time.Time) (time.Duration, error) {
	return b.ttl, b.err
}
func (b beat) Period(nodes int) time.Duration             { return b.period * time.Duration(nodes+1) }
func (b beat) NodeStatus(sm.NodeID) (sm.NodeStatus, bool) { return sm.NodeReady, true }
func (b beat) MarkReReported(sm.NodeID) bool              { return false }

// agentsOver returns the agent protocol over a cluster whose replicas 1
// and 2 registered their API addresses, and where node 7 was removed.
func agentsOver(t *testing.T, leader uint64, mon Monitor) *Agents {
	t.Helper()
	return agentsWith(t, AgentsConfig{Leaders: seat{leader}, Self: seat{leader}, Monitor: mon})
}

// agentsWith is agentsOver with cfg's leaders, self, monitor, link, relay
// settings and clock.
func agentsWith(t *testing.T, cfg AgentsConfig) *Agents {
	t.Helper()
	m := duty.NewMemory(1, clock.NewFake(time.Unix(1_700_000_000, 0)))
	for i, o := range m.SubmitMany(context.Background(), []sm.Command{
		{Kind: sm.CmdSetManager, Seq: 1, Name: "m1:7700"},
		{Kind: sm.CmdSetManager, Seq: 2, Name: "m2:7700"},
		{Kind: sm.CmdUpsertNode, NodeSpec: &sm.Node{ID: 7, Name: "n7", Status: sm.NodeDown}},
	}) {
		if err := o.Err(); err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	if o := m.SubmitMany(context.Background(), []sm.Command{{Kind: sm.CmdRemoveNode, Node: 7}})[0]; o.Err() != nil {
		t.Fatal(o.Err())
	}
	cfg.Cluster, cfg.Feed = duty.NewSubmitter(m, nil), NewFeed(1, nil, 16, 16)
	return NewAgents(cfg)
}

// A heartbeat's answer: the monitor's period and the node's status; where
// the monitor does not run, not_leader naming the leader — but on the
// leader itself (its monitor not started yet, or stepped down while the
// engine still says it leads) a retry here, never not_leader naming
// itself, which the agent would count a failed heartbeat; a node the
// monitor does not know is removed, or not applied here yet (retry); any
// other error is the cluster's, for the API's error table.
func TestHeartbeatAnswers(t *testing.T) {
	notLeader := &wire.Error{Code: wire.CodeNotLeader, Leader: "m2:7700", RetryAfter: int64(200 * time.Millisecond),
		Message: "this manager does not lead the cluster; send heartbeats to the leader"}
	noQuorum := fmt.Errorf("node 5: %w", cluster.ErrNotProposed)
	for _, c := range []struct {
		name   string
		leader uint64
		node   sm.NodeID
		mon    Monitor
		want   any // *wire.HeartbeatAck, *wire.Error or error
	}{
		{name: "ack", leader: 1, node: 5, mon: beat{ttl: 3 * time.Second},
			want: &wire.HeartbeatAck{Period: int64(3 * time.Second), Status: sm.NodeReady}},
		{name: "no monitor here", leader: 2, node: 5, mon: nil, want: notLeader},
		{name: "not the leader", leader: 2, node: 5, mon: beat{err: fmt.Errorf("node 5: %w", cluster.ErrNotMonitoring)},
			want: notLeader},
		{name: "leader without its monitor", leader: 1, node: 5, mon: beat{err: cluster.ErrNotMonitoring}, want: Starting()},
		{name: "no leader known", leader: 0, node: 5, mon: beat{err: cluster.ErrNotMonitoring},
			want: &wire.Error{Code: wire.CodeNotLeader, RetryAfter: int64(200 * time.Millisecond),
				Message: "this manager does not lead the cluster; send heartbeats to the leader"}},
		{name: "just elected", leader: 1, node: 5, mon: beat{err: cluster.ErrMonitorStarting}, want: Starting()},
		{name: "removed node", leader: 1, node: 7, mon: beat{err: cluster.ErrUnknownNode},
			want: &wire.Error{Code: wire.CodeNodeRemoved, Message: "this node was removed from the cluster; clear the agent's data directory to join as a new node"}},
		{name: "node not applied yet", leader: 1, node: 5, mon: beat{err: cluster.ErrUnknownNode},
			want: &wire.Error{Code: wire.CodeUnavailable, Message: "the leader does not know this node yet; retry", RetryAfter: int64(500 * time.Millisecond)}},
		{name: "cluster error", leader: 1, node: 5, mon: beat{err: noQuorum}, want: noQuorum},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := agentsOver(t, c.leader, c.mon)
			ack, err := a.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: c.node})
			var got any = ack
			if err != nil {
				got = err
			}
			if e, ok := c.want.(error); ok && !errors.Is(err, e) {
				if _, isWire := e.(*wire.Error); !isWire {
					t.Fatalf("got %v; want the cluster's error %v", got, e)
				}
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
				t.Fatalf("got %+v; want %+v", got, c.want)
			}
		})
	}
}

// A session opens with the period the monitor hands a cluster of that
// many nodes (1s where no monitor runs), the sync interval, the managers
// and the number of service groups, and the stream records it.
func TestSessionOpens(t *testing.T) {
	for _, c := range []struct {
		name   string
		mon    Monitor
		period time.Duration
	}{
		// The cluster holds no node yet (node 7 was removed): the
		// monitor's period for 0 nodes.
		{name: "monitor", mon: beat{period: 2 * time.Second}, period: 2 * time.Second},
		{name: "no monitor", mon: nil, period: time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := agentsOver(t, 1, c.mon)
			s, err := a.OpenSession(context.Background(), &wire.SessionRequest{Key: "k1", Node: wire.NodeDescription{Hostname: "n1"}})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%+v", &wire.Session{NodeID: s.NodeID, SessionID: s.SessionID, HeartbeatPeriod: int64(c.period),
				SyncInterval: int64(time.Minute), Managers: []string{"m1:7700", "m2:7700"}, Groups: 1})
			if got := fmt.Sprintf("%+v", s); got != want || s.NodeID == 0 || s.SessionID&1 == 0 {
				t.Fatalf("session %s; want %s with a node and an odd session ID", got, want)
			}
			if n := a.Stream().Stats().Sessions; n != 1 {
				t.Fatalf("the stream holds %d session records, want 1", n)
			}
			if c.mon == nil {
				return
			}
			s2, err := a.OpenSession(context.Background(), &wire.SessionRequest{Key: "k2", Node: wire.NodeDescription{Hostname: "n2"}})
			if err != nil || time.Duration(s2.HeartbeatPeriod) != 2*c.period {
				t.Fatalf("second node's session: period %v (%v); want the monitor's for one node, %v", time.Duration(s2.HeartbeatPeriod), err, 2*c.period)
			}
		})
	}
}
