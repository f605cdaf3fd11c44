package statemachine

import (
	"errors"
	"strings"
	"testing"
)

// Orphaning a node is refused unless the node is down; on a down node it
// orphans exactly the node's assigned..running tasks (Result.ID counts
// them), and applying it again orphans nothing more.
func TestOrphanNode(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 4}})
	h.placeAll(2)
	rs := h.apply(Command{Kind: CmdOrphanNode, Node: 1}, Command{Kind: CmdOrphanNode, Node: 9})
	if !errors.Is(rs[0].Err(), ErrNotAllowed) || !errors.Is(rs[1].Err(), ErrNotFound) {
		t.Fatalf("orphan of a ready node, of an unknown node: %v, %v; want not allowed, not found", rs[0].Err(), rs[1].Err())
	}
	var onNode1 []*Task
	for _, tk := range h.tasksIn("web") {
		if tk.Node == 1 {
			onNode1 = append(onNode1, tk)
		}
	}
	if len(onNode1) != 2 {
		t.Fatalf("node 1 runs %d tasks, want 2", len(onNode1))
	}
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown})
	rs = h.apply(Command{Kind: CmdOrphanNode, Node: 1}, Command{Kind: CmdOrphanNode, Node: 1})
	if rs[0].Err() != nil || rs[0].ID != 2 || rs[1].Err() != nil || rs[1].ID != 0 {
		t.Fatalf("orphan node 1 twice: %+v; want 2 then 0 tasks orphaned", rs)
	}
	for _, tk := range onNode1 {
		if tk.Status.State != StateOrphaned {
			t.Errorf("task %d of the down node is %s, want orphaned", tk.ID, tk.Status.State)
		}
	}
	for _, tk := range h.tasksIn("web") {
		if tk.Node == 2 && tk.Status.State != StateRunning {
			t.Errorf("task %d of ready node 2 is %s, want running", tk.ID, tk.Status.State)
		}
	}
}

// A task on no node whose desired state changes is announced
// (EffTaskDesired), before any deletion that follows: event-stream readers
// see the change, not just the task vanishing.
func TestUnplacedDesiredChangeIsAnnounced(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 2}})
	ts := h.tasksIn("web")
	if len(ts) != 2 || ts[0].Node != 0 {
		t.Fatalf("want 2 unplaced tasks, got %d", len(ts))
	}
	h.ok(Command{Kind: CmdRemoveService, Name: "web"})
	desired := map[TaskID]int{}
	for i, e := range h.out.Effects {
		switch e.Kind {
		case EffTaskDesired:
			desired[e.Task] = i + 1
		case EffTaskDeleted:
			if desired[e.Task] == 0 {
				t.Errorf("task %d deleted without its desired change announced first", e.Task)
			}
		}
	}
	for _, tk := range ts {
		if desired[tk.ID] == 0 {
			t.Errorf("task %d: no EffTaskDesired in %+v", tk.ID, h.out.Effects)
		}
	}
}

// A down node that still has a live task is refused removal in words
// that say what lets it go (the orphan timeout) — the same words from the
// submitter's check and from the command itself.
func TestRemoveNodeWithLiveTaskSaysWhatToDo(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1}})
	h.placeAll(1)
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown})
	cmd := Command{Kind: CmdRemoveNode, Node: 1}
	check := h.s.CheckRemoval(&cmd)
	applied := h.apply(cmd)[0]
	for _, r := range []Result{check, applied} {
		if !errors.Is(r.Err(), ErrNotAllowed) || !strings.Contains(r.Msg, "orphan timeout") || !strings.Contains(r.Msg, "shoal status") {
			t.Errorf("removal refused with %q; want it to name the orphan timeout and where to see it", r.Msg)
		}
	}
	if check.Msg != applied.Msg {
		t.Errorf("the check says %q, the command %q", check.Msg, applied.Msg)
	}
}
