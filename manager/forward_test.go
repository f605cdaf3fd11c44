package manager

import (
	"context"
	"net/http"
	"testing"
	"time"

	"shoal/engine"
	"shoal/statemachine"
	"shoal/wire"
)

// An agent that talks to a follower only has its heartbeats taken there
// and forwarded to the leader's node monitor: it never needs a connection
// to the leader, so a leader's death does not send the whole fleet to dial
// its successor. The forwarding endpoint admits manager certificates only.
func TestHeartbeatsToAFollowerReachTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas")
	}
	c := startSecure(t, secureOpts{n: 3, minHeartbeat: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, ok := c.ms[0].E.Leader(engine.ClusterGroup)
	if !ok {
		t.Fatal("no leader after the cluster started")
	}
	follower := leader%3 + 1
	node, ac, creds := c.joinWorker(ctx, follower, "far")
	sess, err := ac.OpenSession(ctx, &wire.SessionRequest{NodeID: statemachine.NodeID(node), Node: wire.NodeDescription{Hostname: "far"}})
	if err != nil {
		t.Fatal(err)
	}
	const beats = 3
	for range beats {
		ack, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: statemachine.NodeID(node), SessionID: sess.SessionID})
		if err != nil {
			t.Fatalf("a heartbeat to the follower: %v", err)
		}
		if ack.Period <= 0 || ack.Status != statemachine.NodeReady {
			t.Fatalf("the follower answered %+v, want the leader's period and the node ready", ack)
		}
	}
	agentBeats := `shoal_http_requests_total{endpoint="agent_heartbeat",code="200"}`
	if got := c.metric(follower, agentBeats); got != "3" {
		t.Fatalf("the follower took %q heartbeats from the agent, want %d", got, beats)
	}
	if got := c.metric(leader, agentBeats); got != "" {
		t.Fatalf("the leader took %q heartbeats from the agent itself, want none: the follower was to forward them", got)
	}
	if got := c.metric(leader, `shoal_http_requests_total{endpoint="peer_heartbeats",code="200"}`); got == "" || got == "0" {
		t.Fatalf("the leader took %q forwarded batches, want at least one", got)
	}
	// A worker certificate may not forward heartbeats itself.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: creds.TLS()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("https://"+c.addr(leader)+"/v1/peer/heartbeats", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a worker certificate forwarding heartbeats: status %d, want 403", resp.StatusCode)
	}
}
