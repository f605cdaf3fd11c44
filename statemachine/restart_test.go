package statemachine

import "testing"

// tick advances the harness clock by d nanoseconds with an empty entry.
func (h *harness) tick(d int64) {
	h.t.Helper()
	h.now += d - 1_000_000 // apply adds 1ms
	h.ok(Command{Kind: CmdTick})
}

func newestIn(h *harness, name string) *Task {
	ts := h.tasksIn(name)
	return ts[len(ts)-1]
}

func TestRestartDelayAndAttempts(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1,
		Restart: RestartPolicy{Condition: RestartOnFailure, Delay: 10e9, MaxAttempts: 2, Window: 120e9}}})
	h.placeAll(1)
	fail := func() {
		t.Helper()
		x := newestIn(h, "web")
		h.ok(Command{Kind: CmdTaskStatus, Task: x.ID, Node: 1, State: StateFailed, ExitCode: 1})
	}
	fail()
	repl := newestIn(h, "web")
	if repl.Desired != DesiredReady || repl.Status.State != StatePending {
		t.Fatalf("replacement is %s/desired %s; want pending, held at ready", repl.Status.State, repl.Desired)
	}
	h.placeAll(1) // the agent may prepare it, but it must not start
	h.tick(5e9)
	if repl.Desired != DesiredReady {
		t.Fatal("replacement started before its restart delay passed")
	}
	h.tick(5e9)
	if repl.Desired != DesiredRunning {
		t.Fatalf("replacement still %s after the delay, with the old task stopped", repl.Desired)
	}
	h.ok(Command{Kind: CmdTaskStatus, Task: repl.ID, Node: 1, State: StateRunning})
	fail() // attempt 2
	second := newestIn(h, "web")
	if second == repl {
		t.Fatal("second failure was not replaced")
	}
	h.tick(10e9)
	h.placeAll(1)
	fail() // attempts exhausted within the window
	if newestIn(h, "web") != second {
		t.Fatal("a third restart happened although max attempts is 2")
	}
}

// A task on a down node cannot be reported stopped until its node is back:
// its replacement is held for the restart delay only (SwarmKit's restart
// supervisor skips the wait for the old task when its node is down).
func TestDelayedReplacementDoesNotWaitForTaskOnDownNode(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1, Restart: RestartPolicy{Delay: 5e9}}})
	h.placeAll(1)
	old := newestIn(h, "web")
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown})
	repl := newestIn(h, "web")
	if repl == old || repl.Desired != DesiredReady {
		t.Fatal("a task on a down node should get a replacement held for the restart delay")
	}
	h.tick(4e9)
	if repl.Desired != DesiredReady {
		t.Fatal("replacement started before its restart delay passed")
	}
	h.tick(1e9)
	if repl.Desired != DesiredRunning {
		t.Fatalf("replacement still %s once the restart delay passed, waiting for a task on a down node", repl.Desired)
	}
}

// A replacement held while its old task's node is down waits for the old
// task again once the node is back (the agent can now stop it and say so),
// up to the one-minute old-task timeout.
func TestDelayedReplacementWaitsForOldTaskOrTimeout(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1, Restart: RestartPolicy{Delay: 5e9}}})
	h.placeAll(1)
	old := newestIn(h, "web")
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown})
	repl := newestIn(h, "web")
	if repl == old || repl.Desired != DesiredReady {
		t.Fatal("a task on a down node should get a delayed replacement")
	}
	h.tick(2e9)
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeInitializing})
	h.tick(8e9)
	if repl.Desired != DesiredReady {
		t.Fatal("replacement started while the old task may still run on a node that is back")
	}
	h.tick(60e9)
	if repl.Desired != DesiredRunning {
		t.Fatal("replacement did not start after the one-minute old-task timeout")
	}
}

// A replacement held for its old task to stop starts as soon as that
// task's node goes down: the node going down looks at the slot again.
func TestHeldTaskStartsWhenOldTasksNodeGoesDown(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1}})
	h.placeAll(1)
	old := newestIn(h, "web")
	h.ok(Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "web", Replicas: 1, Env: []string{"V=2"}}})
	repl := newestIn(h, "web")
	if repl == old || repl.Desired != DesiredReady || !old.Desired.Stopping() {
		t.Fatalf("stop-first update: want the old task stopping and the new one held; got old %s, new %s", old.Desired, repl.Desired)
	}
	h.tick(10e9)
	if repl.Desired != DesiredReady {
		t.Fatal("new task started while the old one still runs on a ready node")
	}
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown})
	if repl.Desired != DesiredRunning {
		t.Fatalf("new task still %s after the old task's node went down", repl.Desired)
	}
}
