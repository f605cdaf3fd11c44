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

// TestModelCheckFindsSeededBugNeverDown: the liveness check sees a disconnected
// node that is never given up (its lost tasks never stop).
func TestModelCheckFindsSeededBugNeverDown(t *testing.T) {
	if !seamsCompiled {
		t.Skip("the seeded bug is compiled only with -tags shoal_seams (make test runs it)")
	}
	b := mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, webOnly: true, bug: mcBugNeverDown}
	res := runModelCheck(b)
	if res.violation == "" {
		t.Fatalf("the checker explored %d states and missed a disconnected node that never goes down", res.states)
	}
	if !strings.Contains(res.violation, "liveness") || !strings.Contains(res.violation, "disconnects") {
		t.Fatalf("violation is not the never-down liveness bug:\n%s", res.violation)
	}
	t.Logf("found, as expected (%d states):\n%s", res.states, res.violation)
	b.bug = mcNoBug
	if res := runModelCheck(b); res.violation != "" {
		t.Fatalf("without the bug the same bounds fail:\n%s", res.violation)
	}
}

// TestModelCheckFindsSeededBugGlobalAside: the step check sees a global
// service's task created pinned to a disconnected node.
func TestModelCheckFindsSeededBugGlobalAside(t *testing.T) {
	if !seamsCompiled {
		t.Skip("the seeded bug is compiled only with -tags shoal_seams (make test runs it)")
	}
	b := mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, bug: mcBugReplaceGlobalAside}
	res := runModelCheck(b)
	if res.violation == "" {
		t.Fatalf("the checker explored %d states and missed a global replacement pinned to a disconnected node", res.states)
	}
	if !strings.Contains(res.violation, "which is away") || !strings.Contains(res.violation, "disconnects") {
		t.Fatalf("violation is not the global-aside bug:\n%s", res.violation)
	}
	t.Logf("found, as expected (%d states):\n%s", res.states, res.violation)
}

// TestModelCheckFindsSeededBugDecideEarly: the step check sees a survivor
// chosen at a reconnecting node's first heartbeat, before it re-reported.
func TestModelCheckFindsSeededBugDecideEarly(t *testing.T) {
	if !seamsCompiled {
		t.Skip("the seeded bug is compiled only with -tags shoal_seams (make test runs it)")
	}
	b := mcBounds{nodes: 2, replicas: 1, retained: 1, events: 1, net: true, webOnly: true, bug: mcBugDecideEarly}
	res := runModelCheck(b)
	if res.violation == "" {
		t.Fatalf("the checker explored %d states and missed a reconnect decided before the re-report", res.states)
	}
	if !strings.Contains(res.violation, "stale facts") || !strings.Contains(res.violation, "reconnects") {
		t.Fatalf("violation is not the decide-early bug:\n%s", res.violation)
	}
	t.Logf("found, as expected (%d states):\n%s", res.states, res.violation)
}
