package engine

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/ipam"
	"shoal/route"
	"shoal/statemachine"
)

// End-to-end flows through three replicas in one process, with the
// replicated time held by a manual clock. Each flow drives the commands the
// agents, node monitor and scheduler would send, checks what the design
// promises, and ends with every replica's state equal per group.

// startFlow starts three replicas of a two-group cluster stamping entries
// with a manual clock, and returns replica 1 (any replica may propose).
func startFlow(t *testing.T) (*Local, *Engine, *clock.Fake) {
	t.Helper()
	clk := newManualClock()
	cfg := testConfig(2)
	cfg.Clock = entryClock{m: clk}
	l := startLocal(t, 3, cfg)
	return l, l.Engine(1), clk
}

// mustSubmitTo submits a per-group command (SubmitToGroup) and fails on
// any error.
func mustSubmitTo(t testing.TB, e *Engine, group int, cmd statemachine.Command) statemachine.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.SubmitToGroup(ctx, group, cmd)
	if err != nil {
		t.Fatalf("%s to group %d: %v", cmd.Kind, group, err)
	}
	return res
}

// redrive makes one run of the outbox duty (deliveries, block leases).
func redrive(t testing.TB, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := duty.NewOutboxDuty(submitter(e), duty.OutboxConfig{Clock: e.cfg.Clock}).RunOnce(ctx); err != nil {
		t.Fatalf("outbox duty: %v", err)
	}
}

// readGroup runs fn over a group's state (linearizably) and fails on error.
func readGroup(t testing.TB, e *Engine, group int, fn func(*statemachine.State)) {
	t.Helper()
	if err := e.Read(context.Background(), group, fn); err != nil {
		t.Fatal(err)
	}
}

// serviceTasks returns the tasks of the service called name, oldest first.
func serviceTasks(t testing.TB, e *Engine, name string) []*statemachine.Task {
	t.Helper()
	g := e.GroupOfService(name)
	var out []*statemachine.Task
	readGroup(t, e, g, func(s *statemachine.State) {
		svc := s.ServiceByName(name)
		if svc == nil {
			return
		}
		for _, id := range s.TaskIDs() {
			if tk := s.Task(id); tk.Service == svc.ID {
				c := *tk
				out = append(out, &c)
			}
		}
	})
	return out
}

// An address stays quarantined after its task fails until the node syncs
// at or past the release sequence without the task; then it is free.
func TestFlowAddressQuarantine(t *testing.T) {
	l, e, _ := startFlow(t)
	mustSubmit(t, e, zoneNodes(1)...)
	// Networks go to the cluster group and are mirrored in every service group.
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdCreateNetwork,
		NetworkSpec: &statemachine.Network{ID: 7, Name: "backend", Subnet: "10.20.0.0/16"}})
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "db", Replicas: 1, Networks: []string{"backend"},
		Restart: statemachine.RestartPolicy{Condition: statemachine.RestartNone}}))
	redrive(t, e) // the cluster group leases db's group a block of backend
	mustSubmit(t, e, assignPending(t, e, 1)...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)
	tasks := serviceTasks(t, e, "db")
	if len(tasks) != 1 || len(tasks[0].Attachments) != 1 {
		t.Fatalf("tasks %+v, want one with one attachment", tasks)
	}
	tk := tasks[0]
	g := route.TaskGroup(tk.ID)
	at := tk.Attachments[0]
	addr := netip.AddrFrom4([4]byte{byte(at.Addr >> 24), byte(at.Addr >> 16), byte(at.Addr >> 8), byte(at.Addr)})
	// look reads the address's pool state and, while it is quarantined,
	// the assignment sequence it was released at on node 1.
	look := func() (st ipam.State, release uint64) {
		t.Helper()
		readGroup(t, e, g, func(s *statemachine.State) {
			p := s.Pool(at.Network)
			var err error
			if st, err = p.State(addr); err != nil {
				t.Errorf("address %s: %v", addr, err)
			}
			for _, q := range p.Quarantine(1) {
				if q.Addr == addr {
					release = q.Seq
				}
			}
		})
		return st, release
	}
	if st, _ := look(); st != ipam.StateHeld {
		t.Fatalf("address %s of running task is in state %d, want held", addr, st)
	}

	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: 1,
		State: statemachine.StateFailed, ExitCode: 2})
	st, release := look()
	if st != ipam.StateQuarantined || release == 0 {
		t.Fatalf("address %s after the task failed is in state %d (release seq %d), want quarantined", addr, st, release)
	}
	sync := func(seq uint64, holds ...statemachine.TaskID) {
		t.Helper()
		mustSubmitTo(t, e, g, statemachine.Command{Kind: statemachine.CmdNodeSync, Node: 1, Seq: seq, Tasks: holds})
	}
	sync(release - 1) // a sync from before the release proves nothing
	if st, _ := look(); st != ipam.StateQuarantined {
		t.Fatalf("address %s after a stale sync (seq %d < %d) is in state %d, want quarantined", addr, release-1, release, st)
	}
	sync(release, tk.ID) // the node still holds the task
	if st, _ := look(); st != ipam.StateQuarantined {
		t.Fatalf("address %s after a sync still holding task %d is in state %d, want quarantined", addr, tk.ID, st)
	}
	sync(release)
	if st, _ := look(); st != ipam.StateFree {
		t.Fatalf("address %s after a sync at seq %d without the task is in state %d, want free", addr, release, st)
	}
	if x := oneTask(t, e, tk.ID); x != nil && !x.Attachments[0].Released {
		t.Errorf("task %d's attachment not marked released after the sync", tk.ID)
	}
	converged(t, l.Engines())
}

// A node with a task of a service with a disconnect window goes
// disconnected: the original keeps its observed state and a replacement
// takes the slot. When the node comes back within the window and is ready
// (re-reported), keep_original keeps the original and stops the replacement.
func TestFlowDisconnectReconnect(t *testing.T) {
	l, e, clk := startFlow(t)
	mustSubmit(t, e, zoneNodes(2)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "api", Replicas: 1,
		Disconnect: statemachine.DisconnectPolicy{LostAfter: int64(time.Minute), Reconcile: statemachine.ReconcileKeepOriginal}}))
	tasks := serviceTasks(t, e, "api")
	if len(tasks) != 1 {
		t.Fatalf("%d tasks, want 1", len(tasks))
	}
	orig := tasks[0].ID
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdAssign, Task: orig, Node: 1})
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)

	setStatus := func(st statemachine.NodeStatus) {
		t.Helper()
		mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: st})
	}
	setStatus(statemachine.NodeDisconnected)
	tasks = serviceTasks(t, e, "api")
	if len(tasks) != 2 {
		t.Fatalf("%d tasks after node 1 disconnected, want the original and a replacement", len(tasks))
	}
	o, r := tasks[0], tasks[1]
	if o.ID != orig || o.Status.State != statemachine.StateRunning || o.Desired != statemachine.DesiredRunning {
		t.Fatalf("original after disconnect: task %d %s desired %s, want task %d running desired running",
			o.ID, o.Status.State, o.Desired, orig)
	}
	if !statemachine.NeedsReconnect(o) {
		t.Errorf("original not marked unknown after the disconnect")
	}
	if r.Slot != o.Slot || r.Desired != statemachine.DesiredRunning {
		t.Fatalf("replacement: slot %d desired %s, want slot %d desired running", r.Slot, r.Desired, o.Slot)
	}
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdAssign, Task: r.ID, Node: 2})
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: r.ID, Node: 2, State: statemachine.StateRunning})

	clk.Advance(30 * time.Second) // back within the one-minute window
	setStatus(statemachine.NodeInitializing)
	setStatus(statemachine.NodeReady) // re-reported: the slot is decided now
	tasks = serviceTasks(t, e, "api")
	live := 0
	for _, tk := range tasks {
		if !tk.Desired.Stopping() {
			live++
		}
		switch tk.ID {
		case orig:
			if tk.Desired != statemachine.DesiredRunning {
				t.Errorf("original desired %s after reconnect, want running (keep_original)", tk.Desired)
			}
		case r.ID:
			if tk.Desired != statemachine.DesiredShutdown {
				t.Errorf("replacement desired %s after reconnect, want shutdown (keep_original)", tk.Desired)
			}
		}
	}
	if live != 1 {
		t.Errorf("%d live tasks in the slot after reconnect, want exactly 1", live)
	}
	converged(t, l.Engines())
}

// A rolling update with parallelism 1 and start-first order moves every
// slot to the new spec version, one at a time, and completes.
func TestFlowRollingUpdateStartFirst(t *testing.T) {
	l, e, _ := startFlow(t)
	mustSubmit(t, e, zoneNodes(2)...)
	spec := statemachine.ServiceSpec{Name: "web", Replicas: 3, Image: "web:1",
		Update: statemachine.UpdateConfig{Parallelism: 1, Order: statemachine.StartFirst}}
	mustSubmit(t, e, createSpec(spec))
	mustSubmit(t, e, assignPending(t, e, 2)...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)

	spec.Image = "web:2"
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
	var version uint32
	var update statemachine.UpdateStatus
	status := func() {
		t.Helper()
		readGroup(t, e, e.GroupOfService("web"), func(s *statemachine.State) {
			svc := s.ServiceByName("web")
			version, update = svc.SpecVersion, svc.Update
		})
	}
	status()
	if update.State != statemachine.Updating {
		t.Fatalf("update state %s after the update, want updating", update.State)
	}
	// Each round plays scheduler and agents: place what is pending, run
	// what is placed, stop what is stopping. Start-first with parallelism
	// 1 needs one round per slot.
	for round := 0; update.State != statemachine.UpdateCompleted; round++ {
		if round == 6 {
			t.Fatalf("update still %s after %d rounds (%s)", update.State, round, update.Message)
		}
		starting := 0
		for _, tk := range serviceTasks(t, e, "web") {
			if tk.SpecVersion == version && !tk.Desired.Stopping() && tk.Status.State < statemachine.StateRunning {
				starting++
			}
		}
		if starting > 1 {
			t.Fatalf("round %d: %d slots updating at once, want at most 1 (parallelism 1)", round, starting)
		}
		mustSubmit(t, e, assignPending(t, e, 2)...)
		mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)
		var stops []statemachine.Command
		for _, tk := range serviceTasks(t, e, "web") {
			if tk.Desired.Stopping() && tk.Node != 0 && !tk.Status.State.Terminal() {
				stops = append(stops, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: tk.Node,
					State: statemachine.StateShutdown})
			}
		}
		mustSubmit(t, e, stops...)
		status()
	}
	slots := map[uint32]uint32{}
	for _, tk := range serviceTasks(t, e, "web") {
		if !tk.Desired.Stopping() {
			if tk.Status.State != statemachine.StateRunning {
				t.Errorf("task %d of slot %d is %s after the update, want running", tk.ID, tk.Slot, tk.Status.State)
			}
			slots[tk.Slot] = tk.SpecVersion
		}
	}
	if len(slots) != 3 {
		t.Errorf("%d live slots after the update, want 3: %v", len(slots), slots)
	}
	for n, v := range slots {
		if v != version {
			t.Errorf("slot %d runs spec version %d, want %d", n, v, version)
		}
	}
	converged(t, l.Engines())
}
