package manager

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/statemachine"
	"shoal/wire"
)

// settledLeader waits until every replica names the same leader of the
// cluster group and returns it.
func settledLeader(t *testing.T, ms []*Manager) uint64 {
	t.Helper()
	var leader uint64
	eventually(t, 20*time.Second, func() (bool, string) {
		leader = 0
		for _, m := range ms {
			id, ok := m.E.Leader(0)
			if !ok || (leader != 0 && id != leader) {
				return false, fmt.Sprintf("replica %d names leader %d (known %v), another %d", m.E.ReplicaID(), id, ok, leader)
			}
			leader = id
		}
		return leader != 0, "no leader"
	})
	return leader
}

// A heartbeat sent to a follower reaches the leader's node monitor: with
// TLS between the managers, an agent that calls only a follower stays
// ready at the leader through several grace periods (three heartbeat
// periods each), and the leader accepted its heartbeats as relayed ones,
// none from the agent itself. A worker certificate may not call the
// relay endpoint.
func TestHeartbeatRelayedByAFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas")
	}
	const period = 200 * time.Millisecond
	c := startSecure(t, secureOpts{n: 3, minHeartbeat: period})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := settledLeader(t, c.ms)
	follower := leader%3 + 1
	node, ac, creds := c.joinWorker(ctx, follower, "relayed")
	sess, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "relayed"}})
	if err != nil {
		t.Fatal(err)
	}
	beats := 0
	beat := func() *wire.HeartbeatAck {
		t.Helper()
		ack, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: statemachine.NodeID(node), SessionID: sess.SessionID})
		if err != nil {
			t.Fatalf("heartbeat %d to the follower: %v", beats+1, err)
		}
		beats++
		return ack
	}
	// The first heartbeats make the node ready (it waits for its
	// re-report's mark only when it reconnects).
	eventually(t, 10*time.Second, func() (bool, string) {
		ack := beat()
		return ack.Status == statemachine.NodeReady, fmt.Sprintf("node status %s", ack.Status)
	})
	status := func() statemachine.NodeStatus {
		st, _ := c.ms[leader-1].mon.NodeStatus(statemachine.NodeID(node))
		return st
	}
	// Five grace periods of heartbeats at half the period they are given.
	for end := time.Now().Add(5 * 3 * period); time.Now().Before(end); {
		ack := beat()
		if ack.Status != statemachine.NodeReady || status() != statemachine.NodeReady {
			t.Fatalf("after %d heartbeats to the follower: the ack says %s, the leader's monitor %s", beats, ack.Status, status())
		}
		time.Sleep(time.Duration(ack.Period) / 2) // the agent's pace, not a wait for a condition
	}
	if got := c.metric(leader, "shoal_agent_heartbeats_relayed_total"); got == "" || got == "0" || atoi(got) < beats {
		t.Errorf("the leader accepted %q relayed heartbeats; the follower was sent %d", got, beats)
	}
	if got := c.metric(leader, "shoal_agent_heartbeats_total"); got != "" && got != "0" {
		t.Errorf("the leader accepted %s heartbeats from the agent itself; want none (each went to the follower)", got)
	}

	// Only managers relay.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: creds.TLS()}}
	defer hc.CloseIdleConnections()
	body, _ := wire.Append(nil, &wire.Heartbeat{NodeID: statemachine.NodeID(node), SessionID: sess.SessionID})
	resp, err := hc.Post("https://"+c.addr(leader)+"/v1/heartbeats/peer", "application/x-shoal-wire", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a worker certificate relaying heartbeats: %s; want 403", resp.Status)
	}
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// Without TLS (serve --dev, --insecure) followers relay too.
func TestHeartbeatRelayedInsecure(t *testing.T) {
	c := startThree(t)
	ctx := ctxT(t)
	leader := settledLeader(t, c.ms)
	follower := leader%3 + 1
	ac, err := client.NewAgentClient([]string{c.ms[follower-1].APIAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s *wire.Session
	eventually(t, 10*time.Second, func() (bool, string) {
		s, err = ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "n1", CPU: 1000, Memory: 1 << 30}})
		return err == nil, fmt.Sprintf("open a session: %v", err)
	})
	for i := range 5 {
		if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID}); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	if got := plainMetric(t, c.ms[leader-1].APIAddr, "shoal_agent_heartbeats_relayed_total"); got < 5 {
		t.Errorf("the leader accepted %v relayed heartbeats; want 5", got)
	}
	if got := plainMetric(t, c.ms[leader-1].APIAddr, "shoal_agent_heartbeats_total"); got != 0 {
		t.Errorf("the leader accepted %v heartbeats from the agent itself; want none", got)
	}
}

// plainMetric reads a counter from a manager's metrics over plain HTTP (0
// when absent).
func plainMetric(t *testing.T, apiAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + apiAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
