package statemachine

import "testing"

// A pending reason lands on the still-pending, still-wanted tasks of the
// named spec version only (all of them, or those listed), survives a
// snapshot, and goes when the task is assigned.
func TestPendingReason(t *testing.T) {
	h := newHarness(t, Config{Group: 1, HistoryRetention: 2})
	h.addNodes(1)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3}})
	ts := h.tasksIn("web")
	h.ok(Command{Kind: CmdAssign, Task: ts[0].ID, Node: 1})

	h.ok(Command{Kind: CmdPendingReason, Name: "web", Seq: 2, Message: "wrong version"})
	h.ok(Command{Kind: CmdPendingReason, Name: "web", Seq: 1, Message: "no suitable node: 1 node paused"})
	for i, tk := range ts {
		want := "no suitable node: 1 node paused"
		if i == 0 {
			want = "" // assigned: past its reason
		}
		if tk.Message() != want {
			t.Errorf("task %d (%s) says %q, want %q", i, tk.Status.State, tk.Message(), want)
		}
	}
	h.ok(Command{Kind: CmdPendingReason, Name: "web", Seq: 1, Message: "listed", Tasks: []TaskID{ts[2].ID, ts[0].ID, 12345}})
	if ts[1].Message() != "no suitable node: 1 node paused" || ts[2].Message() != "listed" || ts[0].Message() != "" {
		t.Fatalf("a listed reason: %q %q %q", ts[0].Message(), ts[1].Message(), ts[2].Message())
	}

	// An unchanged reason changes nothing: no effect, so no event.
	h.apply(Command{Kind: CmdPendingReason, Name: "web", Seq: 1, Message: "listed", Tasks: []TaskID{ts[2].ID}})
	if len(h.out.Effects) != 0 {
		t.Fatalf("an unchanged reason emitted %v", h.out.Effects)
	}

	back := saveLoad(t, h.s)
	if m := back.Task(ts[2].ID).Message(); m != "listed" {
		t.Fatalf("after a snapshot the reason is %q", m)
	}

	h.ok(Command{Kind: CmdAssign, Task: ts[2].ID, Node: 1})
	if ts[2].Message() != "" {
		t.Fatalf("an assigned task still says %q", ts[2].Message())
	}
	if r := h.apply(Command{Kind: CmdPendingReason, Name: "gone", Seq: 1, Message: "x"}); r[0].Code != CodeNotFound {
		t.Fatalf("a reason for a missing service: %+v", r[0])
	}
}
