package statemachine

import (
	"strings"
	"testing"
)

// A task waiting for addresses says why in words a user can act on: no
// advice about internal calls, and counts that are the current ones.
func TestWaitingMessageIsCurrentAndForUsers(t *testing.T) {
	// 10.0.0.0/29: five usable addresses; the VIP takes one.
	h := webOn(t, "10.0.0.0/29", 4)
	ts := h.tasksIn("web")
	h.ok(Command{Kind: CmdTaskStatus, Task: ts[0].ID, Node: 1, State: StateFailed})
	waiting := h.tasksIn("web")[4]
	msg := waiting.Message()
	if waiting.Status.State != StateNew || !strings.Contains(msg, "4 held, 1 quarantined") {
		t.Fatalf("waiting task: %s %q, want new with 4 held, 1 quarantined", waiting.Status.State, msg)
	}
	// Another task dies: its address is quarantined too; the message counts it.
	h.ok(Command{Kind: CmdTaskStatus, Task: ts[1].ID, Node: 1, State: StateFailed})
	var msgs []string
	for _, tk := range h.tasksIn("web") {
		if tk.Status.State == StateNew {
			msgs = append(msgs, tk.Message())
		}
	}
	for _, m := range msgs {
		if !strings.Contains(m, "3 held, 2 quarantined") {
			t.Errorf("waiting task's message %q does not give the current counts (3 held, 2 quarantined)", m)
		}
		if !strings.HasPrefix(m, `waiting for an address: pool exhausted: network "net" (10.0.0.0/29)`) {
			t.Errorf("waiting task's message %q does not say which network is full", m)
		}
		for _, internal := range []string{"LeaseBlock", "LeaseBlockAt", "owner ", "ipam:"} {
			if strings.Contains(m, internal) {
				t.Errorf("waiting task's message %q speaks of %q", m, internal)
			}
		}
	}
}

// A task waiting for its group's first block of a network says so in
// words for users (no package names), and stops saying it once placed.
func TestWaitingForBlockMessageIsForUsers(t *testing.T) {
	w := newLeaseWorld()
	run := func(s step) { w.apply(s.g, s.batch...) }
	run(step{0, []Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/24"}}}})
	w.redrive(run)
	run(step{1, []Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 2, Networks: []string{"net"}}}}})
	want := `waiting for an address: network "net" has no free address leased to this service's group yet; the cluster group is asked for one`
	for _, id := range w.st[1].TaskIDs() {
		if m := w.st[1].Task(id).Message(); m != want {
			t.Fatalf("a task waiting for a block says %q, want %q", m, want)
		}
	}
	w.redrive(run)
	for _, id := range w.st[1].TaskIDs() {
		if tk := w.st[1].Task(id); tk.Status.State != StatePending || tk.Message() != "" {
			t.Fatalf("after the grant a task is %s saying %q, want pending with no message", tk.Status.State, tk.Message())
		}
	}
}
