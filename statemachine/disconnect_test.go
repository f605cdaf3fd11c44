package statemachine

import "testing"

// An unknown task stopped before its window ends leaves the unknown index
// at the next timer pass, not only at its window's end: a pass that finds
// its queue entry first drops both.
func TestStoppedUnknownTasksLeaveTheIndex(t *testing.T) {
	s := buildRunning(t, 1, 10, 2)
	var out Output
	step := func(cmds ...Command) {
		t.Helper()
		s.Apply(cmds, s.LastIndex()+1, s.LastTime()+1e6, &out)
		for _, r := range out.Results {
			if r.Code != CodeOK {
				t.Fatalf("%v", r.Err())
			}
		}
	}
	spec := s.ServiceByName("svc-0").Spec
	spec.Disconnect.LostAfter = 3600e9
	step(Command{Kind: CmdUpdateService, Spec: &spec})
	step(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDisconnected})
	if len(s.unknown) != 5 {
		t.Fatalf("%d unknown tasks after node 1 left, want 5", len(s.unknown))
	}
	step(Command{Kind: CmdRemoveService, Name: "svc-0"})
	s.nextDue = s.LastTime() + 1e6 // another timer is due now
	step(Command{Kind: CmdTick})
	if len(s.unknown) != 0 {
		t.Fatalf("%d stopped tasks still indexed as unknown after a timer pass", len(s.unknown))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A service's running count leaves out the originals held aside on a
// disconnected node: they are not known to run. While the node is away and
// the replacements run, Running and RunningAny stay at the replicas (never
// 12/10); the originals count again only when the node is back and
// reconciliation has kept one task per slot. The kept counts agree with a
// walk at every step (the harness checks the invariants after each entry).
func TestRunningLeavesOutHeldAsideOriginals(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(3)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 10,
		Disconnect: DisconnectPolicy{LostAfter: 3600e9, Reconcile: ReconcileKeepOriginal}}})
	h.placeAll(2) // nodes 1 and 2 hold five tasks each
	id := h.s.ServiceByName("web").ID
	want := func(when string, running int) {
		t.Helper()
		if c := h.s.CountServiceTasks(id); c.Running != running || c.RunningAny != running {
			t.Fatalf("%s: running %d (any version %d), want %d of 10", when, c.Running, c.RunningAny, running)
		}
	}
	want("all placed", 10)
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDisconnected})
	if len(h.s.unknown) != 5 {
		t.Fatalf("%d tasks held aside, want 5", len(h.s.unknown))
	}
	want("node 1 away, replacements not placed", 5)
	var cmds []Command
	for _, tk := range h.tasksIn("web") {
		if tk.Status.State == StatePending {
			cmds = append(cmds, Command{Kind: CmdAssign, Task: tk.ID, Node: 3})
		}
	}
	if len(cmds) != 5 {
		t.Fatalf("%d replacements pending, want 5", len(cmds))
	}
	h.ok(cmds...)
	for i := range cmds {
		cmds[i] = Command{Kind: CmdTaskStatus, Task: cmds[i].Task, Node: 3, State: StateRunning}
	}
	h.ok(cmds...)
	want("node 1 away, replacements running", 10)
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeInitializing})
	want("node 1 back, re-reporting", 10)
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeReady})
	want("node 1 ready, one task kept per slot", 10)
}
