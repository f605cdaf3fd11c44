package engine

import (
	"context"
	"testing"
	"time"

	"shoal/statemachine"
)

// Three replicas in one process take 100,000 commands across four service
// groups while one replica is down for a while; it catches up, and every
// replica ends with the same state in every group.
func TestReplicasConvergeAfterCatchUp(t *testing.T) {
	l := startLocal(t, 3, testConfig(4))
	e := l.Engine(1)
	const nodes, services, replicas = 20, 40, 250 // 10,000 tasks
	n := submitAll(t, e, addNodes(nodes))
	n += submitAll(t, e, createServices("svc", services, replicas))
	n += submitAll(t, e, assignPending(t, e, nodes))
	n += submitAll(t, e, reports(t, e, statemachine.StateAccepted))
	n += submitAll(t, e, reports(t, e, statemachine.StatePreparing))

	// Replica 3 goes down; once the others agree on leaders among
	// themselves, writing continues (proposals to a leader that vanished
	// would have an unknown outcome, so the test waits for the election).
	l.Stop(3)
	waitLeaderAmong(t, []*Engine{l.Engine(1), l.Engine(2)}, 1, 2)
	for _, st := range []statemachine.TaskState{statemachine.StateReady, statemachine.StateStarting, statemachine.StateRunning, statemachine.StateFailed} {
		n += submitAll(t, e, reports(t, e, st))
	}
	// Failed tasks were replaced by new pending ones, while replica 3 was
	// away: far more entries than the log keeps behind a snapshot.
	n += submitAll(t, e, assignPending(t, e, nodes))
	if err := l.Restart(3); err != nil {
		t.Fatal(err)
	}
	n += submitAll(t, e, reports(t, e, statemachine.StateRunning))
	n += submitAll(t, e, reports(t, e, statemachine.StateFailed))
	n += submitAll(t, e, assignPending(t, e, nodes))
	if n < 100_000 {
		t.Fatalf("submitted only %d commands", n)
	}
	converged(t, l.Engines())

	var tasks int
	if err := l.Engine(3).ReadLocal(1, func(s *statemachine.State) { tasks = s.NumTasks() }); err != nil || tasks == 0 {
		t.Fatalf("replica 3 group 1 holds %d tasks (err %v)", tasks, err)
	}
	t.Logf("%d commands", n)
}

// Stopping every replica and starting them again from their data
// directories rebuilds the same state (snapshot + log replay).
func TestWholeClusterRestart(t *testing.T) {
	root := t.TempDir()
	l, err := StartLocal(root, 3, testConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e := l.Engine(2)
	submitAll(t, e, addNodes(5))
	submitAll(t, e, createServices("r", 10, 100))
	submitAll(t, e, assignPending(t, e, 5))
	submitAll(t, e, reports(t, e, statemachine.StateRunning))
	submitAll(t, e, reports(t, e, statemachine.StateComplete))
	want := converged(t, l.Engines())
	l.Close()

	l, err = StartLocal(root, 3, testConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Engines() {
		for g, h := range want {
			eventually(t, 30*time.Second, func() (bool, string) {
				v, ok := view(t, e, g)
				return ok && v.hash == h, "replica rebuilding its state"
			})
		}
	}
	// And the restarted cluster takes writes.
	if _, err := l.Engine(1).Submit(ctx, createServices("after", 1, 1)[0]); err != nil {
		t.Fatal(err)
	}
}

// An entry stamped earlier than the last applied one (a proposer whose
// clock is behind) does not move a group's time back, and every replica
// clamps it alike.
func TestEntryTimeNeverGoesBackwards(t *testing.T) {
	l := startLocal(t, 3, testConfig(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := submitter(l.Engine(1)).Submit(ctx, addNodes(1)[0]); err != nil {
		t.Fatal(err)
	}
	converged(t, l.Engines())
	var last int64
	if err := l.Engine(1).ReadLocal(0, func(s *statemachine.State) { last = s.LastTime() }); err != nil {
		t.Fatal(err)
	}
	behind := last - int64(time.Hour)
	ent := encodeEntry(entryStamp{now: behind}, []statemachine.Command{{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeDown}}, 64)
	if err := l.Engine(2).proposeRaw(ctx, 0, ent).Err(); err != nil {
		t.Fatal(err)
	}
	converged(t, l.Engines())
	for _, e := range l.Engines() {
		var now, at int64
		var status statemachine.NodeStatus
		if err := e.ReadLocal(0, func(s *statemachine.State) {
			now, at, status = s.LastTime(), s.Node(1).StatusAt, s.Node(1).Status
		}); err != nil {
			t.Fatal(err)
		}
		if status != statemachine.NodeDown || now != last || at != last {
			t.Fatalf("replica %d: node %s at %d, group time %d; want down at the last applied time %d (the entry said %d)",
				e.ReplicaID(), status, at, now, last, behind)
		}
	}
}
