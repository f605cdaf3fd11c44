package statemachine

import (
	"errors"
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
