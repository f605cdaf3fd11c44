package statemachine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomCommand draws a command that is often valid for s: services with
// restart delays, disconnect windows and rolling updates, node status
// changes, placements, agent reports, syncs and ticks.
func randomCommand(rng *rand.Rand, s *State) Command {
	names := []string{"web", "db", "mon"}
	name := names[rng.IntN(len(names))]
	switch rng.IntN(12) {
	case 0, 1:
		spec := ServiceSpec{Name: name, Replicas: uint32(1 + rng.IntN(3)), Networks: []string{"net"},
			Restart:    RestartPolicy{Condition: RestartCondition(rng.IntN(3)), Delay: int64(rng.IntN(3)) * 5e9, MaxAttempts: uint32(rng.IntN(3))},
			Disconnect: DisconnectPolicy{LostAfter: int64(rng.IntN(2)) * 30e9, Reconcile: ReconcileMode(rng.IntN(4))},
			Update:     UpdateConfig{Parallelism: uint32(rng.IntN(2)), Delay: int64(rng.IntN(2)) * 10e9, Monitor: 20e9, Order: UpdateOrder(rng.IntN(2)), FailureAction: FailureAction(rng.IntN(3))},
			Image:      fmt.Sprintf("v%d", rng.IntN(3))}
		if name == "mon" {
			spec.Mode = ModeGlobal
		}
		kind := CmdCreateService
		if s.ServiceByName(name) != nil {
			kind = CmdUpdateService
		}
		return Command{Kind: kind, Spec: &spec}
	case 2:
		if rng.IntN(4) == 0 {
			return Command{Kind: CmdRemoveService, Name: name}
		}
		return Command{Kind: CmdRollbackService, Name: name}
	case 3:
		id := NodeID(1 + rng.IntN(3))
		var next []NodeStatus
		for st, ok := range nodeStatusSteps[s.nodes[id].Status] {
			if ok {
				next = append(next, NodeStatus(st))
			}
		}
		return Command{Kind: CmdSetNodeStatus, Node: id, NodeStatus: next[rng.IntN(len(next))]}
	case 4:
		a := AvailActive
		if rng.IntN(3) == 0 {
			a = Availability(rng.IntN(3))
		}
		return Command{Kind: CmdSetAvailability, Node: NodeID(1 + rng.IntN(3)), Availability: a}
	case 5:
		return Command{Kind: CmdTick}
	}
	ids := s.TaskIDs()
	if len(ids) == 0 {
		return Command{Kind: CmdTick}
	}
	t := s.tasks.get(ids[rng.IntN(len(ids))])
	switch {
	case t.Status.State == StatePending:
		node := NodeID(1 + rng.IntN(3))
		if svc := s.services[t.Service]; svc != nil && svc.Spec.Mode == ModeGlobal {
			node = NodeID(t.Slot)
		}
		return Command{Kind: CmdAssign, Task: t.ID, Node: node}
	case rng.IntN(5) == 0 && t.Node != 0:
		n := s.nodes[t.Node]
		var holds []TaskID
		for _, x := range s.NodeTasks(t.Node) {
			if !x.Status.State.Terminal() {
				holds = append(holds, x.ID)
			}
		}
		return Command{Kind: CmdNodeSync, Node: t.Node, Seq: n.AssignSeq - uint64(rng.IntN(2)), Tasks: holds}
	case rng.IntN(6) == 0:
		return Command{Kind: CmdOrphan, Task: t.ID}
	}
	states := []TaskState{StateReady, StateRunning, StateRunning, StateFailed, StateComplete, StateShutdown, StateRejected}
	return Command{Kind: CmdTaskStatus, Task: t.ID, Node: t.Node, State: states[rng.IntN(len(states))], ExitCode: int32(rng.IntN(2))}
}

// TestLoadedStateBehavesLikeLive: a state saved and loaded at any point
// applies every later entry exactly as the live state does (same hash after
// each), and both keep every invariant — so a replica restored from a
// snapshot never diverges from one that never stopped. Also, at every entry,
// loading the live state's snapshot rebuilds every index decisions read
// exactly as the live state holds it (DiffDerived is empty).
func TestLoadedStateBehavesLikeLive(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		live := New(Config{Group: 1})
		var out Output
		now := int64(1e9)
		live.Apply([]Command{
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 1, Name: "n1"}},
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 2, Name: "n2"}},
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 3, Name: "n3"}},
			{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/28"}},
		}, 1, now, &out)
		var restored *State
		for i := uint64(2); i < 400; i++ {
			now += int64(rng.IntN(15)) * 1e9
			batch := make([]Command, 1+rng.IntN(3))
			for j := range batch {
				batch[j] = randomCommand(rng, live)
			}
			if restored == nil && rng.IntN(40) == 0 {
				var buf bytes.Buffer
				if err := live.Save(&buf); err != nil {
					t.Fatal(err)
				}
				restored = New(Config{})
				if err := restored.Load(&buf); err != nil {
					t.Fatal(err)
				}
			}
			live.Apply(batch, i, now, &out)
			if err := live.CheckInvariants(); err != nil {
				t.Fatalf("seed %d entry %d: %v", seed, i, err)
			}
			loaded, err := FromCanonical(live.Canonical())
			if err != nil {
				t.Fatal(err)
			}
			if d := DiffDerived(live, loaded, 5); len(d) > 0 {
				t.Fatalf("seed %d entry %d (after %v): the state loaded from the live state's snapshot rebuilds other indexes: %v", seed, i, batch[0].Kind, d)
			}
			if restored != nil {
				var out2 Output
				restored.Apply(batch, i, now, &out2)
				if restored.Hash() != live.Hash() {
					t.Fatalf("seed %d entry %d: a restored state diverged from the live one after %v", seed, i, batch[0].Kind)
				}
			}
		}
	}
}
