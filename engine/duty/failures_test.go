package duty

import (
	"strings"
	"testing"
	"time"

	"shoal/statemachine"
)

// TestFailingNodeRankedLast: node 1 rejects every task of web. Right after
// each rejection it is the least loaded node, so the replacement would go
// straight back to it; once web's tasks failed there FailureLimit times
// within FailureWindow the replacements go to node 2, and once the window
// passed node 1 takes web's tasks again. With and without a Tracker (the
// failures are learned from the apply fan-out's touched tasks, or from
// the full scan).
func TestFailingNodeRankedLast(t *testing.T) {
	for _, tracked := range []bool{true, false} {
		name := "full-scan"
		if tracked {
			name = "tracker"
		}
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			e := newMem(t, 1, clk)
			cfg := DriverConfig{Clock: clk}
			if tracked {
				tr := NewTracker()
				e.OnApply(tr.OnApply)
				e.OnRecover(tr.OnRecover)
				cfg.Tracker = tr
			}
			var logs []string
			cfg.Logf = func(f string, args ...any) { logs = append(logs, f) }
			d := NewDriver(e, cfg)
			mustSubmit(t, e, zoneNodes(2)...)
			mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 2,
				Restart: statemachine.RestartPolicy{Condition: statemachine.RestartAny}}))

			rejected, avoided := 0, 0
			for range 3 * DefaultFailureLimit {
				runOnce(t, d)
				avoided = max(avoided, d.LastRun().Avoided)
				rejected += rejectAssigned(t, e, 1)
				clk.Advance(time.Second)
			}
			if rejected != DefaultFailureLimit {
				t.Errorf("node 1 rejected %d tasks of web, want %d (then ranked last)", rejected, DefaultFailureLimit)
			}
			if got := placement(t, e)["web"]; got[2] != 2 || got[1] != 0 {
				t.Errorf("web's live tasks per node: %v, want both on node 2", got)
			}
			if avoided != 1 {
				t.Errorf("runs ranked up to %d (batch, node) pairs last, want 1", avoided)
			}
			if n := countContaining(logs, "its tasks go to other nodes first"); n != 1 {
				t.Errorf("logged the ranking %d times, want once: %q", n, logs)
			}

			// The window passes: node 1 is no longer ranked last, and as the
			// least loaded node it takes the next task of web.
			clk.Advance(DefaultFailureWindow)
			spec, _ := specOf(e, "web")
			spec.Replicas = 3
			mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
			runOnce(t, d)
			if got := placement(t, e)["web"]; got[1] != 1 {
				t.Errorf("after the window web's live tasks per node: %v, want one on node 1", got)
			}
			if st := d.LastRun(); st.Avoided != 0 {
				t.Errorf("after the window the run ranked %d pairs last, want 0", st.Avoided)
			}
		})
	}
}

// On a node with no other to take its tasks the service keeps failing
// there; its ranking is logged once, not again each time its task comes
// back from the restart delay (a run without the batch in between).
func TestRankingLoggedOnceWhileItLasts(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	var logs []string
	d := NewDriver(e, DriverConfig{Clock: clk, Logf: func(f string, args ...any) { logs = append(logs, f) }})
	mustSubmit(t, e, zoneNodes(1)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 1,
		Restart: statemachine.RestartPolicy{Condition: statemachine.RestartAny}}))
	for range 4 * DefaultFailureLimit {
		runOnce(t, d)
		rejectAssigned(t, e, 1)
		runOnce(t, d) // the replacement is held for its restart delay: no batch for web
		clk.Advance(time.Second)
	}
	if n := countContaining(logs, "its tasks go to other nodes first"); n != 1 {
		t.Errorf("logged the ranking %d times, want once", n)
	}
}

// rejectAssigned has node reject every task assigned to it and returns
// how many.
func rejectAssigned(t *testing.T, e *Memory, node statemachine.NodeID) int {
	t.Helper()
	var cmds []statemachine.Command
	for _, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool {
		return tk.Node == node && tk.Status.State == statemachine.StateAssigned
	}) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: node,
			State: statemachine.StateRejected, Message: "no such image"})
	}
	mustSubmit(t, e, cmds...)
	return len(cmds)
}

func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestFailedOnNode: which ended tasks count as failures of their service
// on their node.
func TestFailedOnNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   statemachine.TaskState
		node    statemachine.NodeID
		desired statemachine.DesiredState
		reason  statemachine.StopReason
		want    bool
	}{
		{"rejected", statemachine.StateRejected, 1, statemachine.DesiredShutdown, statemachine.StopFailed, true},
		{"failed", statemachine.StateFailed, 1, statemachine.DesiredShutdown, statemachine.StopFailed, true},
		{"failed, not yet stopped", statemachine.StateFailed, 1, statemachine.DesiredRunning, statemachine.StopNone, true},
		{"rejected on no node", statemachine.StateRejected, 0, statemachine.DesiredShutdown, statemachine.StopFailed, false},
		{"failed while moved off a drained node", statemachine.StateFailed, 1, statemachine.DesiredShutdown, statemachine.StopMoved, false},
		{"failed while updated", statemachine.StateFailed, 1, statemachine.DesiredShutdown, statemachine.StopUpdated, false},
		{"shut down", statemachine.StateShutdown, 1, statemachine.DesiredShutdown, statemachine.StopSurplus, false},
		{"node went down", statemachine.StateOrphaned, 1, statemachine.DesiredShutdown, statemachine.StopFailed, false},
		{"complete", statemachine.StateComplete, 1, statemachine.DesiredShutdown, statemachine.StopFailed, false},
	} {
		tk := &statemachine.Task{Node: tc.node, Desired: tc.desired, StopReason: tc.reason}
		tk.Status.State = tc.state
		if got := failedOnNode(tk); got != tc.want {
			t.Errorf("%s: counts %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFailureLogKeepsNewest: noting a task twice counts it once, an old
// failure does not push out a newer one, and the pair is ranked last
// exactly while limit failures are within the window.
func TestFailureLogKeepsNewest(t *testing.T) {
	const sec = int64(time.Second)
	l := newFailureLog(3, 10*time.Second)
	k := batchKey{group: 1, service: 7, version: 1}
	fail := func(id statemachine.TaskID, at int64) *statemachine.Task {
		tk := &statemachine.Task{ID: id, Service: 7, SpecVersion: 1, Node: 4, Desired: statemachine.DesiredShutdown, StopReason: statemachine.StopFailed}
		tk.Status.State, tk.Status.Timestamp = statemachine.StateRejected, at
		return tk
	}
	now := 100 * sec
	l.note(1, fail(1, 95*sec), now)
	l.note(1, fail(1, 95*sec), now)
	l.note(1, fail(2, 96*sec), now)
	if got := l.avoid(k, now, nil); len(got) != 0 {
		t.Fatalf("two distinct failures ranked %v last, limit is 3", got)
	}
	l.note(1, fail(3, 80*sec), now) // outside the window: not kept
	l.note(1, fail(4, 97*sec), now)
	if got := l.avoid(k, now, nil); len(got) != 1 || got[0] != 4 {
		t.Fatalf("three failures within the window: ranked %v last, want [4]", got)
	}
	l.note(1, fail(5, 91*sec), now) // older than all three kept: changes nothing
	if got := l.avoid(k, 105*sec+1, nil); len(got) != 0 {
		t.Fatalf("at 105s the failure at 95s left the window: ranked %v last", got)
	}
	l.sweep(200 * sec)
	if len(l.m) != 0 {
		t.Fatalf("sweep kept %v", l.m)
	}
	if newFailureLog(-1, time.Minute) != nil {
		t.Fatal("a negative limit must turn the log off")
	}
}

// TestNewLeaderRelearnsRetainedFailures: the counts are the leader's soft
// state, but a new leader's driver (a fresh Driver and Tracker) learns
// again, at its first scan, the failed tasks the slots still hold: node 1
// rejected five tasks of web, so the five replacements go to node 2 even
// though node 1 is the least loaded.
func TestNewLeaderRelearnsRetainedFailures(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	old := NewDriver(e, DriverConfig{Clock: clk})
	mustSubmit(t, e, zoneNodes(2)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 10,
		Restart: statemachine.RestartPolicy{Condition: statemachine.RestartAny, Delay: int64(time.Second)}}))
	runOnce(t, old)
	var cmds []statemachine.Command
	for _, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Node == 1 }) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: 1, State: statemachine.StateRejected})
	}
	if len(cmds) != DefaultFailureLimit {
		t.Fatalf("node 1 got %d of web's 10 tasks, want %d", len(cmds), DefaultFailureLimit)
	}
	mustSubmit(t, e, cmds...)
	clk.Advance(2 * time.Second) // past the restart delay

	tr := NewTracker()
	e.OnApply(tr.OnApply)
	leader := NewDriver(e, DriverConfig{Clock: clk, Tracker: tr})
	runOnce(t, leader)
	if got := placement(t, e)["web"]; got[1] != 0 || got[2] != 10 {
		t.Errorf("web's live tasks per node after the new leader's first run: %v, want all 10 on node 2", got)
	}
	if st := leader.LastRun(); st.Avoided != 1 || !st.Rebuilt {
		t.Errorf("new leader's first run: avoided %d pairs (want 1), rebuilt %v (want true)", st.Avoided, st.Rebuilt)
	}
}
