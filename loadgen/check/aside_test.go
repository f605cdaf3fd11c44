package check

import (
	"testing"
	"time"

	"shoal/api/client"
)

func nodeEv(group int, raft uint64, id uint32, status string, since time.Duration) client.Event {
	return client.Event{Group: group, Raft: raft, Topic: "node", Type: "changed",
		Node: &client.Node{ID: id, Status: status, StatusSince: t0.Add(since)}}
}

func svcEv(name string, lostAfter time.Duration) client.Event {
	sp := client.ServiceSpec{Name: name}
	if lostAfter > 0 {
		sp.Disconnect = &client.Disconnect{LostAfter: client.Duration(lostAfter)}
	}
	return client.Event{Topic: "service", Type: "changed", Key: name, Service: &client.Service{Spec: sp}}
}

func taskAt(group int, raft uint64, id string, node uint32, desired, state string, since time.Duration) client.Event {
	ev := taskEv(id, "web", 1, node, desired, state)
	ev.Group, ev.Raft, ev.Task.Since = group, raft, t0.Add(since)
	return ev
}

// TestHeldAside: a task still running on a node back from a disconnect is
// stopped in the entry that made the node initializing (a reconnect
// decided before the re-report): flagged once the node's next event shows
// it changed since. The correct order (the node ready first), a stop while
// the node is away (its window ended), and an entry rendered after a later
// one (its node showing the later status) are not.
func TestHeldAside(t *testing.T) {
	base := []client.Event{
		svcEv("web", time.Minute),
		svcEv("api", 0),
		nodeEv(1, 10, 5, "ready", 0),
		taskAt(1, 11, "7", 5, "running", "running", time.Second),
		nodeEv(1, 20, 5, "disconnected", 30*time.Second),
		taskAt(1, 21, "8", 6, "running", "running", 32*time.Second), // the replacement
	}
	for _, tc := range []struct {
		name string
		evs  []client.Event
		want int
	}{
		{"decided-early", []client.Event{
			nodeEv(1, 30, 5, "initializing", 60*time.Second),
			taskAt(1, 30, "7", 5, "shutdown", "running", time.Second),
			nodeEv(1, 31, 5, "ready", 61*time.Second),
		}, 1},
		{"decided-early-seen-at-quiescence", []client.Event{
			nodeEv(1, 30, 5, "initializing", 60*time.Second),
			taskAt(1, 30, "7", 5, "shutdown", "running", time.Second),
		}, 1},
		{"decided-after-re-report", []client.Event{
			nodeEv(1, 30, 5, "initializing", 60*time.Second),
			nodeEv(1, 31, 5, "ready", 61*time.Second),
			taskAt(1, 31, "7", 5, "shutdown", "running", time.Second),
		}, 0},
		{"window-ended-while-away", []client.Event{
			taskAt(1, 25, "7", 5, "shutdown", "running", time.Second),
			nodeEv(1, 30, 5, "initializing", 60*time.Second),
		}, 0},
		{"rendered-after-a-later-entry", []client.Event{
			// Entry 30 (the node ready again) was applied before entry 25
			// (the window ended, the node away) was rendered.
			nodeEv(1, 25, 5, "initializing", 60*time.Second),
			taskAt(1, 25, "7", 5, "shutdown", "running", time.Second),
			nodeEv(1, 30, 5, "initializing", 60*time.Second),
			nodeEv(1, 31, 5, "ready", 61*time.Second),
		}, 0},
		{"no-window-stopped-as-its-node-went-away-and-came-back", []client.Event{
			// A service without a disconnect window: its task is replaced
			// as on a down node the moment the node is disconnected; the
			// disconnect and the heartbeat that brought the node back were
			// applied in one entry, so the stop shares it with the
			// node rendered initializing.
			nodeEv(1, 30, 5, "ready", 0),
			func() client.Event {
				ev := taskAt(1, 31, "9", 5, "running", "running", time.Second)
				ev.Task.Service = "api"
				return ev
			}(),
			nodeEv(1, 40, 5, "initializing", 60*time.Second),
			func() client.Event {
				ev := taskAt(1, 40, "9", 5, "shutdown", "running", time.Second)
				ev.Task.Service = "api"
				return ev
			}(),
			nodeEv(1, 41, 5, "ready", 61*time.Second),
		}, 0},
		{"another-group", []client.Event{
			nodeEv(2, 30, 5, "initializing", 60*time.Second),
			taskAt(1, 30, "7", 5, "shutdown", "running", time.Second),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t0)
			for _, ev := range append(append([]client.Event(nil), base...), tc.evs...) {
				c.Event(ev, 1, t0)
			}
			c.Quiesced(map[string]int{"web": 1, "api": 1}, t0)
			if n := violations(c, HeldAside); n != tc.want {
				t.Fatalf("%d held-aside violations, want %d: %+v", n, tc.want, c.Violations())
			}
		})
	}
}
