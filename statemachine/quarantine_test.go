package statemachine

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// The per-node lists of networks with quarantine follow the pools through
// releases on two networks and two nodes, a confirming sync, a sync that
// keeps a held address, a node orphaned past its timeout, a snapshot and
// a clone; the sync check answers from them. (The harness checks the
// lists against the pools after every entry; so do the model checker's
// states.)
func TestQuarantineListsFollowThePools(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.network("a", "10.0.0.0/24")
	h.network("b", "10.1.0.0/24")
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 4, Networks: []string{"a", "b"}}})
	h.placeAll(2)
	want := func(when string, lists map[NodeID][]NetworkID) {
		t.Helper()
		if !maps.EqualFunc(h.s.quarNets, lists, slices.Equal) {
			t.Fatalf("%s: networks with quarantine per node %v, want %v", when, h.s.quarNets, lists)
		}
		for n := NodeID(1); n <= 2; n++ {
			if !h.s.Node(n).Status.AcceptsUpdates() {
				continue // a down node's sync always goes through Raft
			}
			seq := h.s.Node(n).AssignSeq
			if got, want := h.s.SyncNeedsCommit(n, seq), len(lists[n]) > 0; got != want {
				t.Fatalf("%s: node %d's sync needs a commit: %v, want %v", when, n, got, want)
			}
		}
		if l := saveLoad(t, h.s); !maps.EqualFunc(l.quarNets, lists, slices.Equal) {
			t.Fatalf("%s: a loaded snapshot lists %v, want %v", when, l.quarNets, lists)
		}
		if c := h.s.Clone(); !maps.EqualFunc(c.quarNets, lists, slices.Equal) {
			t.Fatalf("%s: a clone lists %v, want %v", when, c.quarNets, lists)
		}
	}
	want("placed", nil)
	var on1, on2 []*Task
	for _, tk := range h.tasksIn("web") {
		if tk.Node == 1 {
			on1 = append(on1, tk)
		} else {
			on2 = append(on2, tk)
		}
	}
	if len(on1) != 2 || len(on2) != 2 {
		t.Fatalf("tasks per node %d and %d, want 2 and 2", len(on1), len(on2))
	}
	h.ok(Command{Kind: CmdTaskStatus, Task: on1[0].ID, Node: 1, State: StateFailed},
		Command{Kind: CmdTaskStatus, Task: on1[1].ID, Node: 1, State: StateFailed},
		Command{Kind: CmdTaskStatus, Task: on2[0].ID, Node: 2, State: StateFailed})
	want("three tasks failed (an address on each network)", map[NodeID][]NetworkID{1: {1, 2}, 2: {1, 2}})
	// Node 1 still holds one of its failed tasks: only the other's
	// addresses leave quarantine.
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq, Tasks: []TaskID{on1[1].ID}})
	want("node 1 synced holding one", map[NodeID][]NetworkID{1: {1, 2}, 2: {1, 2}})
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq})
	want("node 1 synced holding none", map[NodeID][]NetworkID{2: {1, 2}})
	h.ok(Command{Kind: CmdSetNodeStatus, Node: 2, NodeStatus: NodeDown})
	h.ok(Command{Kind: CmdOrphanNode, Node: 2})
	want("node 2 orphaned", nil)
}

// quarantineFixture is a group with 100 networks and 1,000 nodes, two
// tasks on each node (on two networks), and the tasks of a tenth of the
// nodes failed: their addresses wait in quarantine. seqs holds each node's
// assignment sequence before the failures.
func quarantineFixture(b *testing.B) (s *State, seqs map[NodeID]uint64) {
	const networks, nodes = 100, 1000
	s = New(Config{Group: 1})
	var out Output
	index := uint64(0)
	apply := func(cmds ...Command) {
		index++
		s.Apply(cmds, index, int64(index)*1e6, &out)
		for i, r := range out.Results {
			if r.Code != CodeOK {
				b.Fatalf("setup command %d (%s): %v", i, cmds[i].Kind, r.Err())
			}
		}
	}
	var cmds []Command
	for i := 1; i <= nodes; i++ {
		cmds = append(cmds, Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("node-%d", i)}})
	}
	apply(cmds...)
	for i := 1; i <= networks; i++ {
		name := fmt.Sprintf("net-%d", i)
		apply(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(i), Name: name, Subnet: fmt.Sprintf("10.%d.0.0/16", i)}})
		apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Replicas: 20, Networks: []string{name}}})
	}
	cmds = cmds[:0]
	for i, id := range s.TaskIDs() {
		cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: NodeID(i%nodes + 1)})
	}
	apply(cmds...)
	seqs = make(map[NodeID]uint64, nodes)
	for n := NodeID(1); n <= nodes; n++ {
		seqs[n] = s.Node(n).AssignSeq
	}
	cmds = cmds[:0]
	for _, id := range s.TaskIDs() {
		if t := s.Task(id); t.Node%10 == 0 {
			cmds = append(cmds, Command{Kind: CmdTaskStatus, Task: id, Node: t.Node, State: StateFailed})
		}
	}
	apply(cmds...)
	return s, seqs
}

// BenchmarkSyncCheck is the check every agent sync makes (does this sync
// need a commit?), in quarantineFixture's group.
func BenchmarkSyncCheck(b *testing.B) {
	s, _ := quarantineFixture(b)
	need := 0
	b.ResetTimer()
	for b.Loop() {
		for n := NodeID(1); n <= 1000; n++ {
			if s.SyncNeedsCommit(n, s.Node(n).AssignSeq) {
				need++
			}
		}
	}
	b.StopTimer()
	if need == 0 {
		b.Fatal("no node's sync needed a commit: nothing is in quarantine")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/check")
}

// BenchmarkSyncWithQuarantine applies, in quarantineFixture's group, the
// syncs of the hundred nodes with addresses in quarantine, each reported
// at the sequence before the releases: they go through Raft and confirm
// nothing yet, as a sync does while a node's releases wait for its next.
func BenchmarkSyncWithQuarantine(b *testing.B) {
	s, seqs := quarantineFixture(b)
	var cmds []Command
	for n := NodeID(10); n <= 1000; n += 10 {
		cmds = append(cmds, Command{Kind: CmdNodeSync, Node: n, Seq: seqs[n]})
	}
	var out Output
	b.ResetTimer()
	for b.Loop() {
		s.Apply(cmds, s.LastIndex()+1, s.LastTime()+1e6, &out)
	}
	b.StopTimer()
	for _, r := range out.Results {
		if r.Code != CodeOK || r.ID != 0 {
			b.Fatalf("sync: %+v, want accepted with nothing freed", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(cmds)), "ns/sync")
}
