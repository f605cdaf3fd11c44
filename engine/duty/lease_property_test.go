package duty

import (
	"context"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"shoal/route"
	"shoal/statemachine"
)

// Two service groups share one small network (a /27: 29 usable addresses,
// leased one address per block) through the cluster group's leases, while
// services scale, tasks run, fail and are replaced, nodes sync, deliveries
// to a group are lost, groups restart from their snapshots and the leader's
// re-drive runs at any moment.
//
// Safety, after every step: an address is never held by live tasks (or
// VIPs) of two groups, and only ever in a block the cluster group leases
// to the holder's group (invariant 6 across groups).
//
// Liveness, once losses stop and the re-drive and syncs have run: a task
// waits for an address only when the whole network is held or
// quarantined, and then it says the network is full.
func TestPropertyTwoGroupsShareASmallNetwork(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		m := NewMemory(2, newFakeClock())
		submit := func(cmds ...statemachine.Command) { m.SubmitMany(ctx, cmds) }
		submit(statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: 1, Name: "n1", Status: statemachine.NodeReady, CPU: 1 << 30, Memory: 1 << 50}})
		submit(statemachine.Command{Kind: statemachine.CmdCreateNetwork,
			NetworkSpec: &statemachine.Network{ID: 1, Name: "net", Subnet: "10.3.0.0/27"}})
		names := []string{"web", "cache"} // groups 1 and 2 of 2
		for _, n := range names {
			submit(statemachine.Command{Kind: statemachine.CmdCreateService,
				Spec: &statemachine.ServiceSpec{Name: n, Replicas: 2, Networks: []string{"net"}}})
		}
		redrive := func() { _ = NewOutboxDuty(m, OutboxConfig{}).RunOnce(ctx) }
		redrive()
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := range steps {
			var lost int // a group whose submissions are lost during this step
			if rapid.IntRange(0, 4).Draw(rt, "crash") == 0 {
				lost = rapid.IntRange(1, 2).Draw(rt, "lost group")
				m.DropApply(func(g int, _ statemachine.Command) bool { return g == lost })
			}
			svc := names[rapid.IntRange(0, 1).Draw(rt, "service")]
			g := route.ServiceGroup(svc, 2)
			switch op := rapid.IntRange(0, 6).Draw(rt, "op"); op {
			case 0:
				scale(t, m, svc, uint32(rapid.IntRange(0, 24).Draw(rt, "replicas")))
			case 1:
				submit(tasksOf(m, g, statemachine.StatePending, func(tk *statemachine.Task) statemachine.Command {
					return statemachine.Command{Kind: statemachine.CmdAssign, Task: tk.ID, Node: 1}
				})...)
			case 2:
				submit(tasksOf(m, g, statemachine.StateAssigned, func(tk *statemachine.Task) statemachine.Command {
					return statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: 1, State: statemachine.StateRunning}
				})...)
			case 3:
				cmds := tasksOf(m, g, statemachine.StateRunning, func(tk *statemachine.Task) statemachine.Command {
					return statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: 1, State: statemachine.StateFailed}
				})
				if len(cmds) > 0 {
					submit(cmds[rapid.IntRange(0, len(cmds)-1).Draw(rt, "victim")])
				}
			case 4:
				syncNode(m, g)
			case 5:
				if err := m.Restore(rapid.IntRange(0, 2).Draw(rt, "restart group")); err != nil {
					rt.Fatal(err)
				}
			case 6:
				submit(statemachine.Command{Kind: statemachine.CmdSetAvailability, Node: 1,
					Availability: statemachine.Availability(rapid.IntRange(0, 1).Draw(rt, "availability"))})
			}
			if rapid.Bool().Draw(rt, "redrive") {
				redrive()
			}
			m.DropApply(nil)
			if v := crossGroupViolation(m); v != "" {
				rt.Fatalf("step %d: %s", i, v)
			}
		}
		// Losses stop: nodes sync, the re-drive runs, until nothing changes.
		for range 4 {
			syncNode(m, 1)
			syncNode(m, 2)
			redrive()
		}
		if v := crossGroupViolation(m); v != "" {
			rt.Fatal(v)
		}
		if d := disagreement(m); d != "" {
			rt.Fatal(d)
		}
		checkFullOnlyWhenFull(rt, m)
	})
}

// tasksOf builds a command for each task of group g in state st.
func tasksOf(m *Memory, g int, st statemachine.TaskState, cmd func(*statemachine.Task) statemachine.Command) []statemachine.Command {
	var out []statemachine.Command
	_ = m.ReadLocal(g, func(s *statemachine.State) {
		for _, id := range s.TaskIDs() {
			if tk := s.Task(id); tk.Status.State == st {
				out = append(out, cmd(tk))
			}
		}
	})
	return out
}

// syncNode sends node 1's sync to group g: it applied every assignment and
// holds exactly the tasks of g on it that are not terminal.
func syncNode(m *Memory, g int) {
	var c statemachine.Command
	ok := false
	_ = m.ReadLocal(g, func(s *statemachine.State) {
		n := s.Node(1)
		if n == nil {
			return
		}
		ok = true
		c = statemachine.Command{Kind: statemachine.CmdNodeSync, Node: 1, Seq: n.AssignSeq}
		for _, tk := range s.NodeTasks(1) {
			if !tk.Status.State.Terminal() {
				c.Tasks = append(c.Tasks, tk.ID)
			}
		}
	})
	if ok {
		_, _ = m.SubmitToGroup(context.Background(), g, c)
	}
}

func checkFullOnlyWhenFull(t interface{ Fatalf(string, ...any) }, m *Memory) {
	used, size := 0, 0
	for g := 1; g <= m.Groups(); g++ {
		s := m.State(g)
		for _, id := range s.NetworkIDs() {
			p := s.Pool(id)
			used += p.Held() + p.Quarantined()
			size = p.Size()
		}
	}
	for g := 1; g <= m.Groups(); g++ {
		s := m.State(g)
		for _, id := range s.TaskIDs() {
			tk := s.Task(id)
			if tk.Status.State != statemachine.StateNew || tk.Desired.Stopping() {
				continue
			}
			if used < size {
				t.Fatalf("group %d task %d waits (%q) while %d of %d addresses are free", g, id, tk.Message(), size-used, size)
			}
			if !strings.Contains(tk.Message(), "is full") {
				t.Fatalf("group %d task %d waits on a full network but says %q", g, id, tk.Message())
			}
		}
	}
}
