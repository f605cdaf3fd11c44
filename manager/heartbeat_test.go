package manager

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"shoal/api/client"
	"shoal/wire"
)

// A poll held by a follower is answered as soon as the cluster's leader
// changes, naming the new leader, long before the poll's wait ends: the
// agent's next heartbeat goes straight there instead of to the old one.
// Wiring: the engine's leader notices reach the assignment stream Start
// builds (the stream's own rule is control's script assign-parked-poll).
func TestPollNamesANewLeaderAtOnce(t *testing.T) {
	c := startThree(t)
	ctx := ctxT(t)
	// The cluster group's leadership settles first: a poll parked while
	// it still moved was answered by that move, before the hand-over.
	var old uint64
	eventually(t, 10*time.Second, func() (bool, string) {
		old = c.leaderOf(0)
		for _, m := range c.ms {
			id, ok := m.E.Leader(0)
			notice, _ := m.E.LeaderNotice(0)
			if !ok || id != old || notice != old {
				return false, fmt.Sprintf("replica %d: leader %d (known %v), noticed %d; replica 1 says %d", m.E.ReplicaID(), id, ok, notice, old)
			}
		}
		return old != 0, "no leader"
	})
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
	type answer struct {
		a   *wire.Assignments
		err error
	}
	got := make(chan answer, 1)
	pollCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := func() {
		go func() {
			a, err := ac.Assignments(pollCtx, &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID,
				Cursor: full.ResultsIn, Wait: int64(wait)})
			got <- answer{a, err}
		}()
	}
	poll()
	// The hand-over comes once the poll waits at the follower (a poll
	// that arrives after it has nothing to announce). A poll answered
	// before it was answered by a leadership that moved by itself (an
	// election on a busy machine): it is sent again.
	eventually(t, 10*time.Second, func() (bool, string) {
		select {
		case r := <-got:
			old = c.leaderOf(0) // the poll stays with the replica it asked
			if r.err != nil || r.a.Leader == "" {
				return false, fmt.Sprintf("a poll answered before the hand-over: %+v, %v", r.a, r.err)
			}
			poll()
			return false, "the poll was answered before the hand-over; sent again"
		default:
		}
		n := parkedPolls(t, c.ms[follower-1].APIAddr)
		return n == 1, fmt.Sprintf("%v polls parked at the follower", n)
	})
	if err := c.ms[old-1].E.HandOver(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		now := c.leaderOf(0)
		a := r.a
		if r.err != nil {
			t.Fatalf("the poll after the hand-over: %v", r.err)
		}
		if a != nil && a.Leader == "" {
			// Answered by a change for the node that the follower applied
			// before it heard of the new leader (a resync when its journal
			// began after the agent's cursor): the agent polls again from
			// there, and that answer names the leader.
			a, err = ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID,
				Cursor: a.ResultsIn, Wait: int64(2 * time.Second)})
			if err != nil {
				t.Fatalf("the poll after the first answer to the hand-over: %v", err)
			}
		}
		if now == old || a == nil || a.Leader != c.ms[now-1].APIAddr {
			t.Fatalf("after the hand-over from replica %d to %d the poll named leader %q, want %q (frame %+v)", old, now, a.Leader, c.ms[now-1].APIAddr, a)
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

// parkedPolls reads shoal_agent_polls_parked from a manager's metrics.
func parkedPolls(t *testing.T, apiAddr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + apiAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	f := fams["shoal_agent_polls_parked"]
	if f == nil || len(f.GetMetric()) == 0 {
		t.Fatal("metric shoal_agent_polls_parked missing")
	}
	m := f.GetMetric()[0]
	return m.GetGauge().GetValue() + m.GetUntyped().GetValue()
}
