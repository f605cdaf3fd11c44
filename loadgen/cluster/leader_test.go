package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
)

// statusServer answers /v1/status with st; a busy one answers nothing
// until the test ends.
func statusServer(t *testing.T, st client.Status, busy bool) string {
	t.Helper()
	end := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy {
			select {
			case <-end:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(func() { close(end); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://")
}

// The first leader after a kill is the earliest time a replica says it
// heard of a leader other than the killed one, after the kill: a follower
// that answers names it even while the new leader is too busy to answer,
// and a replica still naming the killed leader, or a leadership from
// before the kill, does not count.
func TestFirstLeaderIsTheEarliestNamedAfterTheKill(t *testing.T) {
	kill := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return kill.Add(d).Format(time.RFC3339Nano) }
	c := &Cluster{Access: &Access{}, Replicas: []*Replica{
		{ID: 1, API: statusServer(t, client.Status{Replica: 1, Leader: 2, LeaderSince: at(700 * time.Millisecond)}, false)},
		{ID: 2, API: statusServer(t, client.Status{Replica: 2, Leading: true, Leader: 2, LeaderSince: at(600 * time.Millisecond)}, true)}, // too busy
		{ID: 4, API: statusServer(t, client.Status{Replica: 4, Leader: 3, LeaderSince: at(-time.Minute)}, false)},                         // the killed leader, still named
		{ID: 5, API: statusServer(t, client.Status{Replica: 5, Leader: 5, LeaderSince: at(-time.Second)}, false)},                         // from before the kill
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond) // the busy one is cut off
	defer cancel()
	since, ok := c.FirstLeader(ctx, 3, kill)
	if !ok || !since.Equal(kill.Add(700*time.Millisecond)) { // not the busy leader's 600ms
		t.Fatalf("first leader named at %v (%v), want 700ms after the kill, from the follower", since, ok)
	}
	c.Replicas = c.Replicas[2:] // both answer at once
	if since, ok := c.FirstLeader(context.Background(), 3, kill); ok {
		t.Fatalf("a leader named at %v: only the killed one and an older one were", since)
	}
}
