package control_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"shoal/agent"
	"shoal/cluster"
	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/manager/control"
	"shoal/route"
	sm "shoal/statemachine"
	"shoal/wire"
)

var _ agent.Manager = (*control.Agents)(nil)

// leader is a cluster whose leader is replica 1, this one, in contact
// with its quorum.
type leader struct{}

func (leader) Leader(int) (uint64, bool)                  { return 1, true }
func (leader) LeaderNotice(int) (uint64, <-chan struct{}) { return 1, nil }
func (leader) Contact(int) cluster.Contact                { return cluster.Contact{Leading: true, OK: true} }
func (leader) ReplicaID() uint64                          { return 1 }
func (leader) Leading() bool                              { return true }

// beats is a node monitor that takes every heartbeat of a node the
// cluster knows and reports it ready.
type beats struct{ m *duty.Memory }

func (b beats) Heartbeat(_ context.Context, node sm.NodeID, _ time.Time) (time.Duration, error) {
	known := false
	_ = b.m.ReadLocal(route.ClusterGroup, func(st *sm.State) { known = st.Node(node) != nil })
	if !known {
		return 0, cluster.ErrUnknownNode
	}
	return time.Second, nil
}
func (beats) Period(int) time.Duration                   { return time.Second }
func (beats) NodeStatus(sm.NodeID) (sm.NodeStatus, bool) { return sm.NodeReady, true }
func (beats) MarkReReported(sm.NodeID) bool              { return true }

// counted is the in-process manager with its syncs counted.
type counted struct {
	*control.Agents
	synced chan *wire.SyncAnswer
}

func (c *counted) Sync(ctx context.Context, req *wire.SyncRequest) (*wire.SyncAnswer, error) {
	a, err := c.Agents.Sync(ctx, req)
	if err == nil {
		select {
		case c.synced <- a:
		default:
		}
	}
	return a, err
}

// A real agent (the runner around agent.Machine, with the simulated
// executor) runs against the agent protocol in process, over duty.Memory:
// it opens a session (its node is created), is assigned a task by the
// stream, runs it and reports it running (the group applies it), and
// syncs what it holds (nothing to destroy).
// Sequential or not, the same.
func TestAgentRunsAgainstTheProtocolInProcess(t *testing.T) {
	for _, sequential := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequential=%v", sequential), func(t *testing.T) { runAgentInProcess(t, sequential) })
	}
}

func runAgentInProcess(t *testing.T, sequential bool) {
	m := duty.NewMemory(2, clock.Real{})
	sub := duty.NewSubmitter(m, nil)
	feed := control.NewFeed(2, nil, 1024, 64)
	m.OnApply(feed.OnApply)
	var sids atomic.Uint64
	mgr := &counted{Agents: control.NewAgents(control.AgentsConfig{Cluster: sub, Leaders: leader{}, Self: leader{},
		Feed: feed, Monitor: beats{m}, SyncInterval: time.Hour, Sequential: sequential,
		SessionIDs: func() uint64 { return sids.Add(2) }}), synced: make(chan *wire.SyncAnswer, 1)}
	a, err := agent.New(agent.Config{Manager: mgr, Executor: agent.NewSimExecutor(clock.Real{}, agent.SimConfig{}),
		Store: agent.NewMemStore(), Node: wire.NodeDescription{Hostname: "n1", CPU: 4000, Memory: 8 << 30},
		Seed: 1, PollWait: 200 * time.Millisecond, UrgentDelay: time.Millisecond, RoutineInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()

	// waitFor waits until cond holds of group g's state, looking again at
	// every change the feed sees, for at most 10s.
	waitFor := func(what string, g int, cond func(*sm.State) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			_, changed := feed.Changed()
			ok := false
			_ = m.ReadLocal(g, func(st *sm.State) { ok = cond(st) })
			if ok {
				return
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the agent's node", route.ClusterGroup, func(st *sm.State) bool { return st.Node(1) != nil })
	outbox := duty.NewOutboxDuty(sub, duty.OutboxConfig{})
	if err := outbox.RunOnce(ctx); err != nil { // the node reaches the service groups
		t.Fatal(err)
	}
	if _, err := sub.Submit(ctx, sm.Command{Kind: sm.CmdCreateService, Spec: &sm.ServiceSpec{Name: "web", Replicas: 1, Command: []string{"serve"}}}); err != nil {
		t.Fatal(err)
	}
	var task sm.TaskID
	g := 0
	for gg := 1; gg <= 2; gg++ {
		_ = m.ReadLocal(gg, func(st *sm.State) {
			if ids := st.TaskIDs(); len(ids) > 0 {
				task, g = ids[0], gg
			}
		})
	}
	if task == 0 {
		t.Fatal("the service has no task")
	}
	if _, err := sub.Submit(ctx, sm.Command{Kind: sm.CmdAssign, Task: task, Node: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor("the task running", g, func(st *sm.State) bool {
		tk := st.Task(task)
		return tk != nil && tk.Status.State == sm.StateRunning
	})
	a.SyncNow()
	select {
	case ans := <-mgr.synced:
		if len(ans.Destroy) != 0 {
			t.Fatalf("the sync destroys %v; the agent holds only its own running task", ans.Destroy)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the agent's sync")
	}
	waitFor("the task still running after the sync", g, func(st *sm.State) bool {
		return st.Task(task).Status.State == sm.StateRunning
	})
}
