package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
)

// The duties' own tests run over duty.Memory (shoal/engine/duty); these
// check that the engine, under a duty.Submitter, is a working Cluster.

// openOne opens a one-replica engine in a temporary directory and waits
// for its leaders.
func openOne(t testing.TB, cfg Config) *Engine {
	t.Helper()
	cfg.DataDir = t.TempDir()
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// zoneNodes returns upserts of n ready nodes with 4 cores and 8 GiB each;
// the first half in zone a, the rest in zone b.
func zoneNodes(n int) []statemachine.Command {
	var cmds []statemachine.Command
	for i := 1; i <= n; i++ {
		zone := "a"
		if i > n/2 {
			zone = "b"
		}
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
			ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%d", i), Role: statemachine.RoleWorker,
			Labels: map[string]string{"zone": zone}, CPU: 4000, Memory: 8 << 30, Status: statemachine.NodeReady,
		}})
	}
	return cmds
}

func createSpec(spec statemachine.ServiceSpec) statemachine.Command {
	return statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &spec}
}

func mustSubmit(t testing.TB, e *Engine, cmds ...statemachine.Command) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, o := range submitter(e).SubmitMany(ctx, cmds) {
		if err := o.Err(); err != nil {
			t.Fatalf("%s: %v", cmds[i].Kind, err)
		}
	}
}

// newManualClock returns a clock that moves only when told to.
func newManualClock() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

// entryClock stamps entries with a manual clock's time but waits in real
// time, so the engine's back-off and WaitReady still move while the test
// holds the replicated time still.
type entryClock struct {
	clock.Real
	m *clock.Fake
}

func (c entryClock) Now() time.Time { return c.m.Now() }

// oneTask reads the task with id (linearizably); nil if it is gone.
func oneTask(t testing.TB, e *Engine, id statemachine.TaskID) *statemachine.Task {
	t.Helper()
	var tk *statemachine.Task
	err := e.Read(context.Background(), route.TaskGroup(id), func(s *statemachine.State) {
		if x := s.Task(id); x != nil {
			c := *x
			tk = &c
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// The three duties composed as manager.Start composes them: the driver
// places a new service's tasks as soon as they are pending (Signal in
// OnApply), the monitor answers heartbeats once it leads, the timer duty
// runs.
func TestDutiesOverEngine(t *testing.T) {
	sig := duty.NewSignal()
	cfg := testConfig(2)
	cfg.OnApply = sig.OnApply
	e := openOne(t, cfg)
	mustSubmit(t, e, zoneNodes(3)...)
	c := submitter(e)
	d := duty.NewDriver(c, duty.DriverConfig{Signal: sig, Interval: time.Hour, Clock: e.cfg.Clock})
	m, err := duty.NewMonitorDuty(c, duty.MonitorConfig{Clock: e.cfg.Clock})
	if err != nil {
		t.Fatal(err)
	}
	tm := duty.NewTimerDuty(c, duty.TimerConfig{Interval: 10 * time.Millisecond, Clock: e.cfg.Clock})
	e.AddDuty(d)
	e.AddDuty(m)
	e.AddDuty(tm)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 9}))
	eventually(t, 20*time.Second, func() (bool, string) {
		n := len(tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StateAssigned }))
		return n == 9, fmt.Sprintf("%d of 9 tasks assigned", n)
	})
	eventually(t, 20*time.Second, func() (bool, string) {
		_, err := m.Heartbeat(context.Background(), 1, time.Now())
		return err == nil, fmt.Sprintf("heartbeat: %v", err)
	})
	if _, err := m.Heartbeat(context.Background(), 99, time.Now()); err == nil || errors.Is(err, duty.ErrNotMonitoring) {
		t.Errorf("heartbeat of an unknown node: %v, want monitor.ErrUnknownNode", err)
	}
}

func TestSubmitToGroupRefusesRoutedKinds(t *testing.T) {
	e := openOne(t, testConfig(2))
	ctx := context.Background()
	if _, err := e.SubmitToGroup(ctx, 3, statemachine.Command{Kind: statemachine.CmdTick}); err == nil {
		t.Fatal("tick to group 3 of 2 accepted")
	}
	if _, err := e.SubmitToGroup(ctx, 1, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 1})); err == nil {
		t.Fatal("create-service through SubmitToGroup accepted")
	}
	if _, err := e.SubmitToGroup(ctx, 2, statemachine.Command{Kind: statemachine.CmdTick}); err != nil {
		t.Fatal(err)
	}
}
