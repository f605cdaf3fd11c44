package duty

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"shoal/route"
	"shoal/sched"
	"shoal/statemachine"
)

// The incremental scan finds what a full scan finds, after every step of a
// random history over two service groups: services created, scaled,
// updated (their resources change with the spec version), removed; the
// driver placing; tasks reported running, failed or rejected (delayed
// replacements), and their nodes' status, availability and presence
// changing; groups restoring their snapshots; the driver losing and
// regaining the lead; time passing. Same pending batches (tasks in ID order
// with their messages and slots, resources and constraints: the driver's
// parsed once per spec version, the full scan's parsed afresh) and the same
// reservations per node and per service on each node.
func TestPropertyIncrementalScanIsAFullScan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clk := newFakeClock()
		m := NewMemory(2, clk)
		tr := NewTracker()
		m.OnApply(tr.OnApply)
		m.OnRecover(tr.OnRecover)
		d := NewDriver(m, DriverConfig{Clock: clk, Tracker: tr})
		submit := func(cmds ...statemachine.Command) { m.SubmitMany(ctx, cmds) }
		node := func(id int, st statemachine.NodeStatus) statemachine.Command {
			return statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
				ID: statemachine.NodeID(id), Name: fmt.Sprintf("n%d", id), Role: statemachine.RoleWorker, Status: st,
				Labels: map[string]string{"zone": fmt.Sprint(id % 2)}, CPU: 2000, Memory: 8 << 30}}
		}
		for i := 1; i <= 3; i++ {
			submit(node(i, statemachine.NodeReady))
		}
		names := []string{"web", "cache", "db", "mon"}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			name := rapid.SampledFrom(names).Draw(rt, "service")
			g := route.ServiceGroup(name, m.Groups())
			var step string
			switch op := rapid.IntRange(0, 11).Draw(rt, "op"); op {
			case 0:
				spec := statemachine.ServiceSpec{Name: name, Replicas: uint32(rapid.IntRange(0, 6).Draw(rt, "replicas")),
					CPU: int64(rapid.SampledFrom([]int{0, 100, 700}).Draw(rt, "cpu"))}
				if name == "mon" {
					spec.Mode, spec.Replicas = statemachine.ModeGlobal, 0
				}
				if rapid.IntRange(0, 3).Draw(rt, "constrained") == 0 {
					spec.Constraints = []string{"node.labels.zone==1"}
				}
				submit(createSpec(spec))
				step = "create " + name
			case 1, 2:
				spec, ok := specOf(m, name)
				if !ok {
					continue
				}
				if op == 1 {
					spec.Replicas = uint32(rapid.IntRange(0, 8).Draw(rt, "replicas"))
				} else {
					spec.CPU = int64(rapid.SampledFrom([]int{0, 50, 300}).Draw(rt, "new cpu"))
					spec.Constraints = rapid.SampledFrom([][]string{nil, {"node.labels.zone==1"}, {"node.labels.zone!=1"}}).Draw(rt, "new constraints")
				}
				submit(statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
				step = fmt.Sprintf("update %s (op %d)", name, op)
			case 3:
				submit(statemachine.Command{Kind: statemachine.CmdRemoveService, Name: name})
				step = "remove " + name
			case 4, 5:
				if _, err := d.RunOnce(ctx); err != nil {
					rt.Fatal(err)
				}
				step = "driver run"
			case 6:
				to := rapid.SampledFrom([]statemachine.TaskState{statemachine.StateRunning, statemachine.StateFailed,
					statemachine.StateRejected}).Draw(rt, "to")
				var cmds []statemachine.Command
				for _, gg := range []int{1, 2} {
					cmds = append(cmds, tasksWhereIn(m, gg, func(tk *statemachine.Task) bool {
						return tk.Node != 0 && tk.Status.State >= statemachine.StateAssigned && tk.Status.State < to
					}, func(tk *statemachine.Task) statemachine.Command {
						return statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: tk.Node, State: to}
					})...)
				}
				if len(cmds) > 0 {
					submit(cmds[rapid.IntRange(0, len(cmds)-1).Draw(rt, "victim")])
				}
				step = fmt.Sprintf("report %v", to)
			case 7:
				id := rapid.IntRange(1, 4).Draw(rt, "node")
				st := rapid.SampledFrom([]statemachine.NodeStatus{statemachine.NodeReady, statemachine.NodeDisconnected,
					statemachine.NodeDown}).Draw(rt, "node status")
				submit(node(id, st))
				step = fmt.Sprintf("node %d %v", id, st)
			case 8:
				submit(statemachine.Command{Kind: statemachine.CmdSetAvailability, Node: statemachine.NodeID(rapid.IntRange(1, 3).Draw(rt, "node")),
					Availability: statemachine.Availability(rapid.IntRange(0, 2).Draw(rt, "availability"))})
				step = "availability"
			case 9:
				if err := m.Restore(rapid.IntRange(0, 2).Draw(rt, "restore group")); err != nil {
					rt.Fatal(err)
				}
				step = "restore"
			case 10:
				clk.Advance(time.Duration(rapid.IntRange(1, 20).Draw(rt, "seconds")) * time.Second)
				_ = NewTimerDuty(m, TimerConfig{Clock: clk}).RunOnce(ctx)
				step = "time passes"
			case 11:
				// The lead is lost and won again: whatever happened
				// meanwhile was not collected.
				tr.stop()
				submit(node(rapid.IntRange(1, 4).Draw(rt, "node"), statemachine.NodeReady))
				tr.start()
				step = "new term"
			}
			_ = g
			if diff := compareScans(d, m); diff != "" {
				rt.Fatalf("step %d (%s): %s", i, step, diff)
			}
		}
	})
}

// tasksWhereIn builds a command for each task of group g that match picks.
func tasksWhereIn(m *Memory, g int, match func(*statemachine.Task) bool, cmd func(*statemachine.Task) statemachine.Command) []statemachine.Command {
	var out []statemachine.Command
	_ = m.ReadLocal(g, func(s *statemachine.State) {
		for _, id := range s.TaskIDs() {
			if tk := s.Task(id); match(tk) {
				out = append(out, cmd(tk))
			}
		}
	})
	return out
}

func specOf(m *Memory, name string) (statemachine.ServiceSpec, bool) {
	var spec statemachine.ServiceSpec
	ok := false
	_ = m.ReadLocal(route.ServiceGroup(name, m.Groups()), func(s *statemachine.State) {
		if svc := s.ServiceByName(name); svc != nil {
			spec, ok = svc.Spec, true
		}
	})
	return spec, ok
}

// compareScans brings d's incremental scan up to date and compares it with
// a full scan of m; "" when they agree.
func compareScans(d *Driver, m *Memory) string {
	d.run.Lock()
	defer d.run.Unlock()
	inc, ib, ist, err := d.scanIncremental(nil)
	if err != nil {
		return err.Error()
	}
	sc := newScanner(d.cfg.Clock.Now().UnixNano())
	_ = m.ReadLocal(route.ClusterGroup, sc.scanNodes)
	for g := 1; g <= m.Groups(); g++ {
		_ = m.ReadLocal(g, func(s *statemachine.State) { sc.scanGroup(g, s) })
	}
	fullKeys := map[svcRef]uint32{}
	for ref, inf := range sc.keys {
		fullKeys[ref] = inf.key
	}
	full, fb, fst := sc.result()
	if ist.Nodes != fst.Nodes || ist.Live != fst.Live || ist.Pending != fst.Pending || ist.Batches != fst.Batches {
		return fmt.Sprintf("incremental %+v, full %+v", ist, fst)
	}
	type batchView struct {
		key    batchKey
		global bool
		tasks  []statemachine.TaskID
		msgs   []string
		slots  []uint32
		cpu    int64
		cons   string
	}
	view := func(bs []*batch) []batchView {
		var out []batchView
		for _, b := range bs {
			out = append(out, batchView{b.batchKey, b.global, b.tasks, b.msgs, b.slots, b.sg.CPU, fmt.Sprint(b.sg.Constraints, b.perr)})
		}
		return out
	}
	if a, b := view(ib), view(fb); !slices.EqualFunc(a, b, func(x, y batchView) bool {
		return x.key == y.key && x.global == y.global && x.cpu == y.cpu && x.cons == y.cons && slices.Equal(x.tasks, y.tasks) &&
			slices.Equal(x.msgs, y.msgs) && slices.Equal(x.slots, y.slots)
	}) {
		return fmt.Sprintf("pending batches: incremental %+v, full %+v", a, b)
	}
	if diff := compareTables(inc, full, d.inc.keys, fullKeys); diff != "" {
		return diff
	}
	return ""
}

// compareTables compares the nodes, their reservations and their tasks
// per service (each table numbers the services its own way: incKeys and
// fullKeys).
func compareTables(inc, full *sched.Table, incKeys, fullKeys map[svcRef]uint32) string {
	if !slices.Equal(inc.NodeIDs(), full.NodeIDs()) {
		return fmt.Sprintf("nodes: incremental %v, full %v", inc.NodeIDs(), full.NodeIDs())
	}
	for _, id := range full.NodeIDs() {
		ic, im, it, _ := inc.Reserved(id)
		fc, fm, ft, _ := full.Reserved(id)
		if ic != fc || im != fm || it != ft {
			return fmt.Sprintf("node %d: incremental reserves %d CPU, %d mem, %d tasks; full %d, %d, %d", id, ic, im, it, fc, fm, ft)
		}
		in, _ := inc.Node(id)
		fn, _ := full.Node(id)
		if in.Status != fn.Status || in.Availability != fn.Availability || in.CPU != fn.CPU {
			return fmt.Sprintf("node %d: incremental %+v, full %+v", id, in, fn)
		}
		for ref, ik := range incKeys {
			var want uint32
			if fk, ok := fullKeys[ref]; ok {
				want = full.ServiceTasks(id, fk)
			}
			if got := inc.ServiceTasks(id, ik); got != want {
				return fmt.Sprintf("node %d: incremental holds %d tasks of service %v, full %d", id, got, ref, want)
			}
		}
		for ref, fk := range fullKeys {
			if _, ok := incKeys[ref]; !ok && full.ServiceTasks(id, fk) > 0 {
				return fmt.Sprintf("node %d: the incremental scan does not know service %v", id, ref)
			}
		}
	}
	return ""
}
