package statemachine

import (
	"strings"
	"testing"
)

// The model checker's self-tests: seeded bugs (compiled only with -tags
// shoal_seams) that it must find, with a readable trace.

// mcBug names a seeded bug.
type mcBug uint8

const (
	mcNoBug mcBug = iota
	// mcBugReapLive: the reaper deletes running tasks (a safety bug).
	mcBugReapLive
	// mcBugNeverDown: a disconnected node is never given up, so its lost
	// tasks keep running with desired shutdown and their addresses for
	// ever (a liveness bug: the monitor's rule before issue 12).
	mcBugNeverDown
	// mcBugReplaceGlobalAside: a global service's slot on a disconnected
	// node is treated as live, so a task is created pinned to the node
	// that is away (a safety bug: issue 12 item 4).
	mcBugReplaceGlobalAside
	// mcBugDecideEarly: a reconnecting node's originals are decided at its
	// first heartbeat, before it re-reported its tasks (a safety bug:
	// issue 12 item 3).
	mcBugDecideEarly
	// mcBugUnknownPending: a task that never ran on a node that
	// disconnects is left unknown for the window instead of lost at once,
	// so the agent starts it when the node is back (a safety bug: issue 33
	// item 3).
	mcBugUnknownPending
)

func TestModelCheckFindsSeededBug(t *testing.T) {
	if !seamsCompiled {
		t.Skip("the seeded bug is compiled only with -tags shoal_seams (make test runs it)")
	}
	for _, manual := range []bool{false, true} {
		b := mcBounds{nodes: 1, replicas: 1, retained: 1, events: 0, bug: mcBugReapLive, manual: manual}
		res := runModelCheck(b)
		if res.violation == "" {
			t.Fatalf("manual=%v: the checker explored %d states and missed a reaper that deletes running tasks", manual, res.states)
		}
		if !strings.Contains(res.violation, "reaper deleted task") || !strings.Contains(res.violation, "1. user create") {
			t.Fatalf("violation lacks a readable trace:\n%s", res.violation)
		}
		t.Logf("manual=%v found, as expected:\n%s", manual, res.violation)
	}
}

// The network-mode seeded bugs: each must be found at small bounds, with
// a violation that names it.
//   - never-down (liveness): a disconnected node that is never given up
//     (its lost tasks never stop); without the bug the same bounds pass;
//   - global-aside (step check): a global service's task created pinned to
//     a disconnected node;
//   - decide-early (step check): a survivor chosen at a reconnecting
//     node's first heartbeat, before it re-reported;
//   - unknown-pending (step check): a task that had not run when its node
//     went silent is started there once the node is back; without the bug
//     the same bounds pass.
func TestModelCheckFindsSeededNetBugs(t *testing.T) {
	if !seamsCompiled {
		t.Skip("the seeded bug is compiled only with -tags shoal_seams (make test runs it)")
	}
	for _, tc := range []struct {
		name, missed string
		b            mcBounds
		want         [2]string // both in the violation
		cleanPasses  bool      // the same bounds without the bug pass
	}{
		{"never-down", "a disconnected node that never goes down",
			mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, webOnly: true, bug: mcBugNeverDown},
			[2]string{"liveness", "disconnects"}, true},
		{"global-aside", "a global replacement pinned to a disconnected node",
			mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, bug: mcBugReplaceGlobalAside},
			[2]string{"which is away", "disconnects"}, false},
		{"decide-early", "a reconnect decided before the re-report",
			mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, webOnly: true, bug: mcBugDecideEarly},
			[2]string{"stale facts", "reconnects"}, false},
		{"unknown-pending", "a task started on a node that went silent before it ran",
			mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, webOnly: true, bug: mcBugUnknownPending},
			[2]string{"had not run when its node went silent", "reconnects"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runModelCheck(tc.b)
			if res.violation == "" {
				t.Fatalf("the checker explored %d states and missed %s", res.states, tc.missed)
			}
			if !strings.Contains(res.violation, tc.want[0]) || !strings.Contains(res.violation, tc.want[1]) {
				t.Fatalf("violation is not the %s bug:\n%s", tc.name, res.violation)
			}
			t.Logf("found, as expected (%d states):\n%s", res.states, res.violation)
			if tc.cleanPasses {
				b := tc.b
				b.bug = mcNoBug
				if res := runModelCheck(b); res.violation != "" {
					t.Fatalf("without the bug the same bounds fail:\n%s", res.violation)
				}
			}
		})
	}
}
