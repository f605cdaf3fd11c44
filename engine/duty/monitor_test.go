package duty

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"shoal/engine/monitor"
	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
)

// nodeStatus reads (linearizably) a node's status in the cluster group.
func nodeStatus(t testing.TB, e *Memory, id statemachine.NodeID) statemachine.NodeStatus {
	t.Helper()
	var st statemachine.NodeStatus
	if err := e.Read(context.Background(), route.ClusterGroup, func(s *statemachine.State) { st = s.Node(id).Status }); err != nil {
		t.Fatal(err)
	}
	return st
}

// One replica, a manual clock (5s TTL, 15s grace, 30s failover grace, 1m
// orphan timeout): node 1 holds a task with a disconnect window, node 2 two
// tasks without, node 3 keeps heartbeating. At the end of the failover grace
// node 1 goes disconnected and node 2 down; a minute later node 2's tasks
// are orphaned; node 1 reconnects through initializing to ready.
func TestMonitorDuty(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 2, clk)
	mustSubmit(t, e, zoneNodes(3)...)
	mustSubmit(t, e,
		createSpec(statemachine.ServiceSpec{Name: "keep", Replicas: 1,
			Disconnect: statemachine.DisconnectPolicy{LostAfter: int64(time.Hour)}}),
		createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 2}))
	var assign []statemachine.Command
	for _, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StatePending }) {
		var name string
		if err := e.ReadLocal(route.TaskGroup(tk.ID), func(s *statemachine.State) { name = s.Service(tk.Service).Spec.Name }); err != nil {
			t.Fatal(err)
		}
		node := statemachine.NodeID(2)
		if name == "keep" {
			node = 1
		}
		assign = append(assign, statemachine.Command{Kind: statemachine.CmdAssign, Task: tk.ID, Node: node})
	}
	mustSubmit(t, e, assign...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)

	d, err := NewMonitorDuty(e, MonitorConfig{Clock: clk, Interval: 5 * time.Second, Monitor: monitor.Config{
		Jitter: -1, MinTTL: 5 * time.Second, FailoverGrace: 30 * time.Second, OrphanTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Heartbeat(context.Background(), 3, clk.Now()); !errors.Is(err, ErrNotMonitoring) {
		t.Fatalf("heartbeat before leadership: %v, want ErrNotMonitoring", err)
	}
	if err := d.BecomeLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	// step heartbeats node 3, moves the clock one interval and ticks.
	step := func() {
		t.Helper()
		if _, err := d.Heartbeat(context.Background(), 3, clk.Now()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(5 * time.Second)
		if err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 { // to 25s
		step()
	}
	for id := statemachine.NodeID(1); id <= 3; id++ {
		if st := nodeStatus(t, e, id); st != statemachine.NodeReady {
			t.Fatalf("node %d is %s within the failover grace", id, st)
		}
	}
	step() // 30s: the failover grace ends
	for id, want := range map[statemachine.NodeID]statemachine.NodeStatus{
		1: statemachine.NodeDisconnected, 2: statemachine.NodeDown, 3: statemachine.NodeReady} {
		if st := nodeStatus(t, e, id); st != want {
			t.Errorf("node %d is %s after 30s, want %s", id, st, want)
		}
	}
	// Node 2's tasks, replaced at once, stay running there until the
	// orphan timeout; once orphaned (desired shutdown, terminal) the state
	// machine removes them.
	onNode2 := func() []*statemachine.Task {
		return tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Node == 2 })
	}
	var orig []statemachine.TaskID
	for range 11 { // to 85s: node 2 has been down 55s
		step()
	}
	for _, tk := range onNode2() {
		if tk.Status.State != statemachine.StateRunning {
			t.Fatalf("task %d on node 2 is %s before the orphan timeout", tk.ID, tk.Status.State)
		}
		orig = append(orig, tk.ID)
	}
	if len(orig) != 2 {
		t.Fatalf("node 2 holds %d tasks before the orphan timeout, want 2", len(orig))
	}
	step() // 90s
	settled(t, func() (bool, string) {
		for _, id := range orig {
			var tk *statemachine.Task
			if err := e.Read(context.Background(), route.TaskGroup(id), func(s *statemachine.State) {
				if x := s.Task(id); x != nil {
					c := *x
					tk = &c
				}
			}); err != nil {
				t.Fatal(err)
			}
			if tk != nil && tk.Status.State != statemachine.StateOrphaned {
				return false, fmt.Sprintf("task %d of down node 2 is %s, want orphaned (or removed)", id, tk.Status.State)
			}
		}
		return true, ""
	})
	if st := nodeStatus(t, e, 1); st != statemachine.NodeDisconnected {
		t.Errorf("node 1 is %s, want still disconnected", st)
	}

	// Node 1 reconnects: initializing at its first heartbeat, ready at the
	// first heartbeat after it re-reported its tasks.
	b, err := d.Heartbeat(context.Background(), 1, clk.Now())
	if err != nil || !b.Changed || b.Change.To != statemachine.NodeInitializing {
		t.Fatalf("heartbeat of disconnected node 1: %+v, %v; want a change to initializing", b, err)
	}
	if st := nodeStatus(t, e, 1); st != statemachine.NodeInitializing {
		t.Fatalf("node 1 is %s after its heartbeat returned, want initializing", st)
	}
	if b, err := d.Heartbeat(context.Background(), 1, clk.Now()); err != nil || b.Changed {
		t.Fatalf("heartbeat before the re-report: %+v, %v; want no change", b, err)
	}
	if !d.MarkReReported(1) {
		t.Fatal("MarkReReported(1) = false for an initializing node")
	}
	if b, err := d.Heartbeat(context.Background(), 1, clk.Now()); err != nil || b.Change.To != statemachine.NodeReady {
		t.Fatalf("heartbeat after the re-report: %+v, %v; want a change to ready", b, err)
	}
	if st := nodeStatus(t, e, 1); st != statemachine.NodeReady {
		t.Fatalf("node 1 is %s, want ready", st)
	}
	if _, err := d.Heartbeat(context.Background(), 9, clk.Now()); !errors.Is(err, monitor.ErrUnknownNode) {
		t.Errorf("heartbeat of an unknown node: %v, want monitor.ErrUnknownNode", err)
	}
}

// A node created while the duty runs is tracked (at a heartbeat, or at the
// next tick) and expires a grace after its creation if it never heartbeats.
func TestMonitorDutyNewNode(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	d, err := NewMonitorDuty(e, MonitorConfig{Clock: clk, Interval: 5 * time.Second, Monitor: monitor.Config{
		Jitter: -1, MinTTL: 5 * time.Second, FailoverGrace: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runDuty(t, d.Run)
	defer stop()
	blockUntil(t, clk, 1) // leading, waiting for its first tick
	mustSubmit(t, e, zoneNodes(2)...)
	if _, err := d.Heartbeat(context.Background(), 1, clk.Now()); err != nil {
		t.Fatalf("heartbeat of a node created since the last tick: %v", err)
	}
	for range 3 { // 15s: node 2, tracked at the 5s tick, is within its grace
		clk.Advance(5 * time.Second)
		blockUntil(t, clk, 1) // the tick is done
		if _, err := d.Heartbeat(context.Background(), 1, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if st := nodeStatus(t, e, 2); st != statemachine.NodeReady {
		t.Fatalf("node 2 is %s before its grace ended", st)
	}
	clk.Advance(5 * time.Second) // 20s: 15s after it was tracked
	blockUntil(t, clk, 1)
	if st := nodeStatus(t, e, 2); st != statemachine.NodeDown {
		t.Errorf("node 2 is %s a grace after it was tracked, want down", st)
	}
	if st := nodeStatus(t, e, 1); st != statemachine.NodeReady {
		t.Errorf("heartbeating node 1 is %s, want ready", st)
	}
}

// An orphaning that one service group did not apply (here: refused once,
// as when the node's down status has not reached it yet) is sent again at
// the next tick, so that group's tasks of the down node are orphaned too.
func TestMonitorDutyRetriesOrphan(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 2, clk)
	mustSubmit(t, e, zoneNodes(1)...)
	var specs []statemachine.Command
	for _, name := range []string{"a", "b", "c", "d"} { // spread over both groups
		specs = append(specs, createSpec(statemachine.ServiceSpec{Name: name, Replicas: 1}))
	}
	mustSubmit(t, e, specs...)
	mustSubmit(t, e, assignPending(t, e, 1)...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)
	groups := map[int]bool{}
	for _, tk := range tasksWhere(t, e, func(*statemachine.Task) bool { return true }) {
		groups[route.TaskGroup(tk.ID)] = true
	}
	if !groups[1] || !groups[2] {
		t.Fatalf("tasks in groups %v, want both", groups)
	}
	refused := 0
	e.FailSubmissions(func(c statemachine.Command) error {
		if c.Kind == statemachine.CmdOrphanNode && refused == 0 {
			refused++
			return errors.New("refused once")
		}
		return nil
	})
	d := leadingMonitor(t, e, clk, time.Minute)
	notOrphaned := func() int {
		return len(tasksWhere(t, e, func(tk *statemachine.Task) bool {
			return tk.Node == 1 && tk.Status.State != statemachine.StateOrphaned
		}))
	}
	var tickErrs int
	for range 20 { // 100s: down at 10s, orphaned at 70s, retried at 75s
		clk.Advance(5 * time.Second)
		if err := d.Tick(context.Background()); err != nil {
			tickErrs++
		}
	}
	if refused != 1 || tickErrs != 1 {
		t.Fatalf("orphan refused %d times, ticks failed %d times; want 1 and 1", refused, tickErrs)
	}
	if st := nodeStatus(t, e, 1); st != statemachine.NodeDown {
		t.Fatalf("node 1 is %s, want down", st)
	}
	if n := notOrphaned(); n != 0 {
		t.Errorf("%d tasks of the down node are not orphaned after the retry", n)
	}
}

// A heartbeat whose status change the cluster group refuses (the state
// moved on without the monitor: here node 1 was set ready behind its back
// while the monitor had it disconnected) re-syncs that node from the state,
// so its next heartbeat is answered as ready with no change proposed.
func TestRefusedHeartbeatChangeResyncsThatNode(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	mustSubmit(t, e, zoneNodes(3)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "keep", Replicas: 1,
		Disconnect: statemachine.DisconnectPolicy{LostAfter: int64(time.Hour)}}))
	mustSubmit(t, e, assignPending(t, e, 1)...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)
	d := leadingMonitor(t, e, clk, time.Hour)
	for range 6 { // past the grace: node 1 (silent, with a window) goes disconnected
		for _, id := range []statemachine.NodeID{2, 3} {
			if _, err := d.Heartbeat(context.Background(), id, clk.Now()); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(5 * time.Second)
		if err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if st := nodeStatus(t, e, 1); st != statemachine.NodeDisconnected {
		t.Fatalf("node 1 is %s, want disconnected", st)
	}
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeInitializing})
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeReady})
	if _, err := d.Heartbeat(context.Background(), 1, clk.Now()); err == nil {
		t.Fatal("the change disconnected -> initializing of a node the state has ready was accepted")
	}
	if st, _ := d.NodeStatus(1); st != statemachine.NodeReady {
		t.Fatalf("after the refused change the monitor has node 1 %s, want ready (as the state has it)", st)
	}
	b, err := d.Heartbeat(context.Background(), 1, clk.Now())
	if err != nil || b.Changed {
		t.Fatalf("next heartbeat: changed %v, err %v; want no change", b.Changed, err)
	}
}

// leadingMonitor returns a monitor duty of e that leads: 5s TTL, no
// jitter, a 10s failover grace and the given orphan timeout.
func leadingMonitor(t *testing.T, e *Memory, clk *clock.Fake, orphan time.Duration) *MonitorDuty {
	t.Helper()
	d, err := NewMonitorDuty(e, MonitorConfig{Clock: clk, Interval: 5 * time.Second, Monitor: monitor.Config{
		Jitter: -1, MinTTL: 5 * time.Second, FailoverGrace: 10 * time.Second, OrphanTimeout: orphan}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BecomeLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// The orphan timeout the monitor is configured with is the one used: the
// tasks of a node down for less than 20s of a 20s timeout are kept, and
// the first tick past it orphans them (no failover grace configured, so
// the node goes down at its first expiry).
func TestMonitorDutyOrphansAtTheConfiguredTimeout(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 1, clk)
	mustSubmit(t, e, zoneNodes(1)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 2}))
	mustSubmit(t, e, assignPending(t, e, 1)...)
	mustSubmit(t, e, reports(t, e, statemachine.StateRunning)...)
	d, err := NewMonitorDuty(e, MonitorConfig{Clock: clk, Interval: time.Second, Monitor: monitor.Config{
		Jitter: -1, MinTTL: time.Second, FailoverGrace: -1, OrphanTimeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BecomeLeader(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Orphaned tasks wanted stopped are reaped at once: count those left.
	live := func() int {
		return len(tasksWhere(t, e, func(tk *statemachine.Task) bool {
			return tk.Node == 1 && tk.Status.State != statemachine.StateOrphaned
		}))
	}
	start := clk.Now()
	var downAt, orphanedAt time.Duration
	for i := 0; i < 60 && orphanedAt == 0; i++ {
		clk.Advance(time.Second)
		if err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		at := clk.Now().Sub(start)
		if downAt == 0 && nodeStatus(t, e, 1) == statemachine.NodeDown {
			downAt = at
		}
		switch n := live(); {
		case n == 0:
			orphanedAt = at
		case n != 2:
			t.Fatalf("%d of node 1's 2 tasks left unorphaned at %s", n, at)
		}
	}
	t.Logf("node down at %s, its tasks orphaned at %s", downAt, orphanedAt)
	if orphanedAt == 0 {
		t.Fatalf("node 1 (down at %s) not orphaned after 60s; the timeout is 20s", downAt)
	}
	if downAt == 0 || downAt > 4*time.Second {
		t.Fatalf("node 1 went down at %s, want within 3 heartbeats of 1s (no failover grace)", downAt)
	}
	if held := orphanedAt - downAt; held < 20*time.Second || held > 21*time.Second {
		t.Fatalf("tasks orphaned %s after the node went down, want 20s (the configured timeout) to 21s", held)
	}
}
