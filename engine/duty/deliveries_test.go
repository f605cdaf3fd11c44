package duty

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// gateCluster counts delivery submissions and holds each one until the
// gate opens.
type gateCluster struct {
	*Memory
	runs    atomic.Int32
	entered chan struct{} // closed at the first delivery
	gate    chan struct{}
	// arrived gets one value per caller that started waiting in
	// Deliveries.
	arrived chan struct{}
}

func (g *gateCluster) SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	if len(cmds) > 0 && cmds[0].Kind == statemachine.CmdDeliver {
		if g.runs.Add(1) == 1 {
			close(g.entered)
		}
		<-g.gate
	}
	return g.Memory.SubmitMany(ctx, cmds)
}

// Concurrent submitters share delivery runs: while one run is under way,
// every caller that arrives waits for the one next run, so fifty callers
// cost at most two runs (not fifty, each resending the whole backlog), and each
// returns only after a run that began after its call, so every group has
// applied the whole outbox when they are back.
func TestDeliveriesShareRuns(t *testing.T) {
	m := newMem(t, 3, nil)
	m.DropApply(func(g int, _ statemachine.Command) bool { return g != 0 }) // the backlog
	for id := statemachine.NodeID(1); id <= 20; id++ {
		submitAll(t, m, statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: id, Name: "n", Status: statemachine.NodeReady}})
	}
	m.DropApply(nil)
	g := &gateCluster{Memory: m, entered: make(chan struct{}), gate: make(chan struct{}), arrived: make(chan struct{}, 200)}
	d := NewDeliveries(g)
	last := 0
	d.waitChanged = func(n int) { // under d's lock: one value per caller that starts waiting
		if n > last {
			g.arrived <- struct{}{}
		}
		last = n
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	call := func() {
		defer wg.Done()
		errs <- d.Deliver(ctx)
	}
	wg.Add(1)
	go call()
	<-g.entered
	wg.Add(49)
	for range 49 {
		go call()
	}
	// Every caller is now waiting in Deliveries (the first one's run at
	// the gate): wait for all fifty to say so (no sleeps: each sends once
	// on arrival).
	timeout := time.After(10 * time.Second)
	for n := 0; n < 50; n++ {
		select {
		case <-g.arrived:
		case <-timeout:
			t.Fatalf("%d of 50 callers delivering or waiting after 10s", n)
		}
	}
	close(g.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := g.runs.Load(); n > 2 {
		t.Errorf("%d delivery submissions for 50 concurrent callers; want at most 2 (the second run may find nothing left)", n)
	}
	checkOutboxDelivered(t, m)
}

// A caller whose context ends while the run it waits for is under way
// stops waiting; the run goes on for the others and delivers everything.
// (Made with that caller's context, the run was cut short and the others
// got its error.)
func TestDeliveriesOutliveImpatientCallers(t *testing.T) {
	m := newMem(t, 2, nil)
	m.DropApply(func(g int, _ statemachine.Command) bool { return g != 0 })
	for id := statemachine.NodeID(1); id <= 5; id++ {
		submitAll(t, m, statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: id, Name: "n", Status: statemachine.NodeReady}})
	}
	m.DropApply(nil)
	g := &gateCluster{Memory: m, entered: make(chan struct{}), gate: make(chan struct{}), arrived: make(chan struct{}, 10)}
	d := NewDeliveries(g)
	impatient, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- d.Deliver(impatient) }()
	<-g.entered // its run is at the gate
	second := make(chan error, 1)
	waiting := make(chan struct{}, 10)
	d.mu.Lock()
	prev := d.waiting
	d.waitChanged = func(n int) { // the second caller starts waiting
		if n > prev {
			waiting <- struct{}{}
		}
		prev = n
	}
	d.mu.Unlock()
	go func() { second <- d.Deliver(context.Background()) }()
	<-waiting
	cancel()
	select {
	case err := <-first:
		if err != context.Canceled {
			t.Fatalf("the impatient caller got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		close(g.gate)
		t.Fatal("the impatient caller still waited for the run 10s after its context ended")
	}
	close(g.gate)
	if err := <-second; err != nil {
		t.Fatalf("the patient caller got %v", err)
	}
	if n := g.runs.Load(); n != 1 {
		t.Errorf("%d delivery submissions; want 1 (the first run delivered everything, the second found nothing left)", n)
	}
	checkOutboxDelivered(t, m)
}

// checkOutboxDelivered fails t unless every service group applied the
// whole outbox of the cluster group.
func checkOutboxDelivered(t *testing.T, m *Memory) {
	t.Helper()
	var next uint64
	_ = m.ReadLocal(0, func(s *statemachine.State) { next = s.OutboxNext() })
	for grp := 1; grp <= m.Groups(); grp++ {
		var applied uint64
		_ = m.ReadLocal(grp, func(s *statemachine.State) { applied, _ = s.OutboxApplied() })
		if applied+1 != next {
			t.Errorf("group %d applied the outbox up to %d; the cluster group's next entry is %d", grp, applied, next)
		}
	}
}

// A cluster setting, like a node, reaches every service group before its
// submission returns: the submitter delivers the outbox.
func TestClusterSettingsDeliveredBySubmitter(t *testing.T) {
	m := newMem(t, 3, nil)
	mustSubmit(t, m, statemachine.Command{Kind: statemachine.CmdSetClusterSettings,
		Settings: &statemachine.ClusterSettings{TaskHistoryLimit: 7}})
	checkOutboxDelivered(t, m)
	for g := 0; g <= m.Groups(); g++ {
		if got := m.State(g).Settings().TaskHistoryLimit; got != 7 {
			t.Errorf("group %d has task history limit %d, want 7", g, got)
		}
	}
}
