package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// One embedded replica: commands are routed, batched, applied and
// readable; the group count is fixed at creation.
func TestSingleReplica(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(4)
	cfg.DataDir = dir
	var pendingEffects atomic.Int64
	cfg.OnApply = func(_ int, _ uint64, effects []statemachine.Effect) {
		for _, ef := range effects {
			if ef.Kind == statemachine.EffPending {
				pendingEffects.Add(1)
			}
		}
	}
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	submitAll(t, e, addNodes(3))
	if _, err := e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService,
		Spec: &statemachine.ServiceSpec{Name: "web", Replicas: 3}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService,
		Spec: &statemachine.ServiceSpec{Name: "web", Replicas: 3}})
	if !errors.Is(err, statemachine.ErrExists) {
		t.Fatalf("second create: got %v, want ErrExists", err)
	}
	g := e.GroupOfService("web")
	var tasks, nodes int
	if err := e.Read(ctx, g, func(s *statemachine.State) { tasks, nodes = s.NumTasks(), len(s.NodeIDs()) }); err != nil {
		t.Fatal(err)
	}
	if tasks != 3 || nodes != 3 {
		t.Fatalf("group %d holds %d tasks and %d node mirrors, want 3 and 3", g, tasks, nodes)
	}
	if n := pendingEffects.Load(); n != 3 {
		t.Fatalf("OnApply saw %d pending-task effects, want 3", n)
	}
	// A task ID naming a group the cluster lacks is rejected before Raft.
	_, err = e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdAssign, Task: statemachine.TaskID(9 << 48), Node: 1})
	if !errors.Is(err, statemachine.ErrNotFound) {
		t.Fatalf("assign to group 9: got %v, want ErrNotFound", err)
	}

	// A command the replicas could not decode is refused alone; it never
	// poisons the entry it would have shared.
	outs := e.SubmitMany(ctx, []statemachine.Command{
		{Kind: statemachine.CmdKind(250)},
		{Kind: statemachine.CmdTaskStatus, Task: statemachine.TaskID(uint64(g)<<48 | 1), Node: 1, State: statemachine.TaskState(99)},
		{Kind: statemachine.CmdRemoveService, Name: "no-such-service"},
	})
	if !errors.Is(outs[0].Err(), statemachine.ErrInvalid) || !errors.Is(outs[1].Err(), statemachine.ErrInvalid) ||
		!errors.Is(outs[2].Err(), statemachine.ErrNotFound) {
		t.Fatalf("bad commands beside a good one: %+v", outs)
	}

	// Concurrent submitters share entries: far fewer entries than commands.
	before, _ := view(t, e, g)
	var wg sync.WaitGroup
	const submitters = 400
	for i := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Re-reports of an unassigned task: rejected, but each is applied.
			e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdTaskStatus,
				Task: statemachine.TaskID(uint64(g)<<48 | uint64(i+1)), Node: 1, State: statemachine.StateRunning})
		}()
	}
	wg.Wait()
	after, _ := view(t, e, g)
	used := after.index - before.index
	if used >= submitters/4 {
		t.Errorf("%d concurrent submissions used %d entries; the proposer should coalesce them", submitters, used)
	}
	t.Logf("%d concurrent submissions, %d entries", submitters, used)
	e.Close()
	e.Close() // a second Close is harmless

	cfg.Groups = 8
	if _, err := Open(cfg); !errors.Is(err, ErrDataDir) || !strings.Contains(err.Error(), "4 service groups") {
		t.Fatalf("reopening with another group count: got %v, want ErrDataDir naming 4 groups", err)
	}
	cfg.Groups = 0 // take the stored count
	e2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if e2.Groups() != 4 {
		t.Fatalf("reopened with %d groups, want the stored 4", e2.Groups())
	}
	if err := e2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e2.Read(ctx, g, func(s *statemachine.State) { tasks = s.NumTasks() }); err != nil || tasks != 3 {
		t.Fatalf("after restart: %d tasks, err %v; want 3", tasks, err)
	}
}

func TestRouting(t *testing.T) {
	const groups = 8
	seen := map[int]bool{}
	for _, name := range []string{"web", "db", "cache", "api", "worker", "queue", "auth", "search", "mail", "log"} {
		g := route.ServiceGroup(name, groups)
		if g < 1 || g > groups || g != route.ServiceGroup(name, groups) {
			t.Fatalf("service %q routed to group %d", name, g)
		}
		seen[g] = true
	}
	if len(seen) < 4 {
		t.Errorf("10 names hit only %d of %d groups", len(seen), groups)
	}
	// The hash is part of the on-disk contract: it must never change.
	if g := route.ServiceGroup("web", groups); g != route.ServiceGroup("web", groups) || route.ServiceGroup("web", 1) != 1 {
		t.Fatal("unstable routing")
	}
	gs, rej := route.Groups(&statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1}, groups, nil)
	if rej.Code != statemachine.CodeOK || len(gs) != 1 || gs[0] != route.ClusterGroup {
		t.Fatalf("node status goes to %v (%v), want the cluster group alone (its outbox reaches the others)", gs, rej)
	}
	gs, _ = route.Groups(&statemachine.Command{Kind: statemachine.CmdDeliver, Group: 5}, groups, nil)
	if len(gs) != 1 || gs[0] != 5 {
		t.Fatalf("a delivery to group 5 routed to %v", gs)
	}
	gs, _ = route.Groups(&statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: statemachine.TaskID(3<<48 | 77)}, groups, nil)
	if len(gs) != 1 || gs[0] != 3 {
		t.Fatalf("task of group 3 routed to %v", gs)
	}
	if _, rej := route.Groups(&statemachine.Command{Kind: statemachine.CmdCreateService}, groups, nil); rej.Code != statemachine.CodeInvalid {
		t.Fatalf("create without spec: %v", rej)
	}
	gs, _ = route.Groups(&statemachine.Command{Kind: statemachine.CmdRollbackService, Name: "web"}, groups, nil)
	if len(gs) != 1 || gs[0] != route.ServiceGroup("web", groups) {
		t.Fatalf("rollback of web routed to %v, not its service's group", gs)
	}
	if _, rej := route.Groups(&statemachine.Command{Kind: statemachine.CmdNodeSync, Node: 1}, groups, nil); rej.Code != statemachine.CodeInvalid {
		t.Fatalf("a sync without a group was routed: %v", rej)
	}
}

// The replica's snapshot is what statemachine.State.Load reads.
func TestSnapshotRoundTrip(t *testing.T) {
	r := newReplica(2, 8, nil)
	ent := encodeEntry(entryStamp{now: 42}, createServices("svc", 3, 5), 0)
	r.mu.st.Apply(mustDecode(t, ent), 7, 42, &r.mu.out)
	ctx, err := r.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if err := r.SaveSnapshot(ctx, &buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	r2 := newReplica(2, 8, nil)
	if err := r2.RecoverFromSnapshot(strings.NewReader(buf.String()), nil, nil); err != nil {
		t.Fatal(err)
	}
	if r2.mu.st.Hash() != r.mu.st.Hash() || r2.mu.st.NumTasks() != 15 {
		t.Fatalf("snapshot round trip lost state: %d tasks", r2.mu.st.NumTasks())
	}
	if err := newReplica(3, 8, nil).RecoverFromSnapshot(strings.NewReader(buf.String()), nil, nil); err == nil {
		t.Fatal("a snapshot of group 2 must not load into group 3")
	}
}

func mustDecode(t *testing.T, ent []byte) []statemachine.Command {
	t.Helper()
	_, batch, err := decodeEntry(ent)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// decodeEntry never panics, whatever the bytes.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(entryStamp{now: 1}, createServices("a", 1, 1), 0))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := decodeEntry(b); err != nil && !errors.Is(err, statemachine.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	})
}
