package statemachine

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// The kept rolling-update walk (keptwalk.go) against the full walk: two
// states apply the same random history — rolling updates and rollbacks
// with delays, monitors, parallelism and failure actions, scales,
// assignments, status reports, failures, nodes going down, away and back,
// time passing — one keeping the walk, one walking every slot at every
// pass (walkAll). After every entry their results, hashes and next due
// times must be equal, and the kept sums of every service under update
// must equal a fresh walk of its slots.
func TestPropertyKeptUpdateWalkIsTheFullWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kept, full := New(Config{Group: 1}), New(Config{Group: 1})
		full.walkAll = true
		index, now := uint64(0), int64(1_000_000_000)
		var out Output
		apply := func(what string, cmds ...Command) {
			index++
			now += rapid.Int64Range(0, 3_000_000_000).Draw(rt, "advance")
			kept.Apply(cmds, index, now, &out)
			got := append([]Result(nil), out.Results...)
			full.Apply(cmds, index, now, &out)
			for i := range got {
				if got[i].Code != out.Results[i].Code {
					rt.Fatalf("%s: kept walk answered %v, full walk %v", what, got[i], out.Results[i])
				}
			}
			if kept.Hash() != full.Hash() || kept.NextDue() != full.NextDue() {
				rt.Fatalf("after %s (entry %d): kept walk's state differs from the full walk's (next due %d vs %d)",
					what, index, kept.NextDue(), full.NextDue())
			}
			if err := kept.checkKeptWalks(); err != nil {
				rt.Fatalf("after %s (entry %d): %v", what, index, err)
			}
		}
		const nodes = 3
		for i := 1; i <= nodes; i++ {
			apply("add node", Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("n%d", i),
				Status: NodeReady, CPU: 4000, Memory: 1 << 33}})
		}
		specs := map[string]*ServiceSpec{}
		names := []string{"a", "b"}
		update := func(rt *rapid.T) UpdateConfig {
			return UpdateConfig{
				Parallelism:     uint32(rapid.IntRange(0, 2).Draw(rt, "parallelism")),
				Delay:           rapid.Int64Range(0, 4).Draw(rt, "delay") * 1e9,
				Monitor:         rapid.Int64Range(0, 4).Draw(rt, "monitor") * 1e9,
				FailureAction:   FailureAction(rapid.IntRange(0, 2).Draw(rt, "action")),
				MaxFailureRatio: float64(rapid.IntRange(0, 2).Draw(rt, "ratio")) / 4,
				Order:           UpdateOrder(rapid.IntRange(0, 1).Draw(rt, "order")),
			}
		}
		pick := func(rt *rapid.T, match func(*Task) bool) *Task {
			var ids []TaskID
			for _, id := range kept.TaskIDs() {
				if match(kept.Task(id)) {
					ids = append(ids, id)
				}
			}
			if len(ids) == 0 {
				return nil
			}
			return kept.Task(ids[rapid.IntRange(0, len(ids)-1).Draw(rt, "task")])
		}
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "step") {
			case 0: // create or change a service's spec (a rolling update)
				name := rapid.SampledFrom(names).Draw(rt, "service")
				sp := specs[name]
				kind := CmdUpdateService
				if sp == nil {
					sp, kind = &ServiceSpec{Name: name, Replicas: 3}, CmdCreateService
					specs[name] = sp
				}
				sp.Image = fmt.Sprintf("img:%d", rapid.IntRange(0, 3).Draw(rt, "image"))
				sp.Update = update(rt)
				sp.Rollback = update(rt)
				if sp.Rollback.FailureAction == ActionRollback {
					sp.Rollback.FailureAction = ActionPause
				}
				sp.Disconnect.LostAfter = rapid.Int64Range(0, 1).Draw(rt, "window") * 5e9
				c := *sp
				apply("spec "+name, Command{Kind: kind, Spec: &c})
			case 1: // scale
				name := rapid.SampledFrom(names).Draw(rt, "service")
				if sp := specs[name]; sp != nil {
					sp.Replicas = uint32(rapid.IntRange(0, 4).Draw(rt, "replicas"))
					c := *sp
					apply("scale "+name, Command{Kind: CmdUpdateService, Spec: &c})
				}
			case 2: // roll back by hand
				apply("rollback", Command{Kind: CmdRollbackService, Name: rapid.SampledFrom(names).Draw(rt, "service")})
			case 3, 4: // assign a pending task
				if tk := pick(rt, func(t *Task) bool { return t.Status.State == StatePending }); tk != nil {
					apply("assign", Command{Kind: CmdAssign, Task: tk.ID, Node: NodeID(rapid.IntRange(1, nodes).Draw(rt, "node"))})
				}
			case 5, 6: // an agent reports a live task a state further
				tk := pick(rt, func(t *Task) bool {
					return t.Node != 0 && t.Status.State >= StateAssigned && !t.Status.State.Terminal()
				})
				if tk == nil {
					break
				}
				to := rapid.SampledFrom([]TaskState{StateAccepted, StateRunning, StateRunning, StateFailed, StateComplete, StateShutdown}).Draw(rt, "to")
				if to <= tk.Status.State {
					to = StateRunning
				}
				apply("report "+to.String(), Command{Kind: CmdTaskStatus, Task: tk.ID, Node: tk.Node, State: to, ExitCode: 1})
			case 7: // a node goes down, away, or comes back
				st := rapid.SampledFrom([]NodeStatus{NodeReady, NodeReady, NodeDown, NodeDisconnected, NodeInitializing}).Draw(rt, "status")
				apply("node "+st.String(), Command{Kind: CmdSetNodeStatus, Node: NodeID(rapid.IntRange(1, nodes).Draw(rt, "node")), NodeStatus: st})
			default: // time passes
				apply("tick", Command{Kind: CmdTick})
			}
		}
	})
}

// BenchmarkReportDuringRollingUpdate: ten services of 1,000 running
// replicas on 100 nodes are being updated (one slot at a time, a minute
// between slots); each iteration applies one entry with one agent report:
// a task of one of them failed. Its slot is reconciled and the update
// stepped: "full walk" walks every slot of the service to count them,
// "kept walk" looks at the slot that changed.
func BenchmarkReportDuringRollingUpdate(b *testing.B) {
	const services, replicas, nodes = 10, 1000, 100
	s := buildRunning(b, services, replicas, nodes)
	var out Output
	apply := func(s *State, cmds ...Command) {
		s.Apply(cmds, s.LastIndex()+1, s.LastTime()+1e6, &out)
		for i, r := range out.Results {
			if r.Code != CodeOK {
				b.Fatalf("%s: %v", cmds[i].Kind, r.Err())
			}
		}
	}
	for i := range services {
		apply(s, Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: replicas,
			Env: []string{"V=2"}, Update: UpdateConfig{Parallelism: 1, Delay: 60e9}}})
	}
	var snap bytes.Buffer
	if err := s.Save(&snap); err != nil {
		b.Fatal(err)
	}
	var reports []Command
	for _, id := range s.TaskIDs() {
		if t := s.Task(id); t.Status.State == StateRunning && !t.Desired.Stopping() {
			reports = append(reports, Command{Kind: CmdTaskStatus, Task: id, Node: t.Node, State: StateFailed, ExitCode: 1})
		}
	}
	if len(reports) < services*(replicas-1) {
		b.Fatalf("%d running tasks", len(reports))
	}
	for _, mode := range []string{"full walk", "kept walk"} {
		b.Run(mode, func(b *testing.B) {
			var l *State
			next := len(reports)
			for b.Loop() {
				if next == len(reports) {
					b.StopTimer()
					l = New(Config{})
					if err := l.Load(bytes.NewReader(snap.Bytes())); err != nil {
						b.Fatal(err)
					}
					l.walkAll = mode == "full walk"
					next = 0
					b.StartTimer()
				}
				apply(l, reports[next])
				next++
			}
		})
	}
}
