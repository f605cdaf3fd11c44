package statemachine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"shoal/ipam"
)

func (h *harness) network(name, cidr string) {
	h.t.Helper()
	h.ok(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(len(h.s.networks) + 1), Name: name, Subnet: cidr}})
}

func (h *harness) pool(name string) *ipam.Pool { return h.s.Pool(h.s.networkByName(name).ID) }

func addrOf(t *Task) netip.Addr { return u32Addr(t.Attachments[0].Addr) }

// webOn returns a one-group harness with one node and a service "web" of
// replicas tasks on network "net" (cidr), every task placed on the node.
func webOn(t *testing.T, cidr string, replicas uint32) *harness {
	t.Helper()
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.network("net", cidr)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: replicas, Networks: []string{"net"}}})
	h.placeAll(1)
	return h
}

func TestAddressQuarantinedUntilNodeSync(t *testing.T) {
	h := webOn(t, "10.0.0.0/24", 1)
	old := h.tasksIn("web")[0]
	oldAddr := addrOf(old)
	if len(h.pool("net").VIPs(uint64(h.s.ServiceByName("web").ID))) != 1 {
		t.Fatal("service has no VIP")
	}
	seqBefore := h.s.Node(1).AssignSeq
	h.ok(Command{Kind: CmdTaskStatus, Task: old.ID, Node: 1, State: StateFailed})
	if st, _ := h.pool("net").State(oldAddr); st != ipam.StateQuarantined {
		t.Fatalf("dead task's address is %s, want quarantined", st)
	}
	repl := h.tasksIn("web")[1]
	if addrOf(repl) == oldAddr {
		t.Fatal("replacement got the quarantined address")
	}
	// A sync collected before the release frees nothing, even without the task.
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: seqBefore})
	if st, _ := h.pool("net").State(oldAddr); st != ipam.StateQuarantined {
		t.Fatalf("a stale sync freed the address (%s)", st)
	}
	// A current sync that still lists the task frees nothing either.
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq, Tasks: []TaskID{old.ID, repl.ID}})
	if st, _ := h.pool("net").State(oldAddr); st != ipam.StateQuarantined {
		t.Fatalf("a sync listing the task freed its address (%s)", st)
	}
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq, Tasks: []TaskID{repl.ID}})
	if st, _ := h.pool("net").State(oldAddr); st != ipam.StateFree {
		t.Fatalf("after a confirming sync the address is %s, want free", st)
	}
	rs := h.apply(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq + 5})
	if !errors.Is(rs[0].Err(), ErrInvalid) {
		t.Fatalf("a sync from the future: %v", rs[0].Err())
	}
}

func TestUnassignedTaskFreesAddressAtOnce(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.network("net", "10.0.0.0/24")
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3, Networks: []string{"net"}}})
	if held := h.pool("net").Held(); held != 4 {
		t.Fatalf("held %d, want 3 tasks + 1 VIP", held)
	}
	h.ok(Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "web", Replicas: 1, Networks: []string{"net"}}})
	if n := len(h.tasksIn("web")); n != 1 {
		t.Fatalf("%d tasks after scale-down of unassigned tasks, want 1", n)
	}
	p := h.pool("net")
	if p.Held() != 2 || p.Quarantined() != 0 {
		t.Fatalf("held %d quarantined %d; never-assigned tasks must free at once", p.Held(), p.Quarantined())
	}
}

func TestVIPFreedOnlyWithService(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.network("net", "10.0.0.0/24")
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1, Networks: []string{"net"}}})
	h.placeAll(1)
	id := uint64(h.s.ServiceByName("web").ID)
	h.ok(Command{Kind: CmdRemoveService, Name: "web"})
	if len(h.pool("net").VIPs(id)) != 1 {
		t.Fatal("VIP freed while the service's task still runs")
	}
	rs := h.apply(Command{Kind: CmdRemoveNetwork, Name: "net"})
	if !errors.Is(rs[0].Err(), ErrNotAllowed) {
		t.Fatalf("removing a network in use: %v", rs[0].Err())
	}
	task := h.tasksIn("web")[0]
	h.ok(Command{Kind: CmdTaskStatus, Task: task.ID, Node: 1, State: StateShutdown})
	if h.s.ServiceByName("web") != nil || len(h.pool("net").VIPs(id)) != 0 {
		t.Fatal("service and VIP should be gone after the last task")
	}
	rs = h.apply(Command{Kind: CmdRemoveNetwork, Name: "net"})
	if !errors.Is(rs[0].Err(), ErrNotAllowed) {
		t.Fatalf("removing a network with quarantined addresses: %v", rs[0].Err())
	}
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq})
	h.ok(Command{Kind: CmdRemoveNetwork, Name: "net"})
}

func TestExhaustedPoolTasksWait(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.network("tiny", "10.9.0.0/29") // 5 usable addresses
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 6, Networks: []string{"tiny"}}})
	ts := h.tasksIn("web")
	waiting := 0
	for _, x := range ts {
		if x.Status.State == StateNew {
			waiting++
			if !bytes.Contains([]byte(x.Message()), []byte("pool exhausted")) {
				t.Fatalf("waiting task says %q", x.Message())
			}
		}
	}
	if waiting != 2 {
		t.Fatalf("%d tasks wait for addresses, want 2 (5 addresses: 1 VIP + 4 tasks)", waiting)
	}
	// Scaling down frees the unassigned tasks' addresses at once.
	h.ok(Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "web", Replicas: 4, Networks: []string{"tiny"}}})
	for _, x := range h.tasksIn("web") {
		if x.Status.State == StateNew {
			t.Fatalf("task %d still waits after scale-down", x.ID)
		}
	}
	rs := h.apply(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 9, Name: "clash", Subnet: "10.9.0.0/16"}},
		Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 10, Name: "bad", Subnet: "10.9.0.0/33"}})
	for i, r := range rs {
		if !errors.Is(r.Err(), ErrInvalid) {
			t.Fatalf("bad network %d accepted: %v", i, r.Err())
		}
	}
}

// TestNoDuplicateAddressAcrossRestarts is SwarmKit's regression: many rounds
// of creating, removing and restarting tasks, with the state saved and
// loaded between rounds, never attach one address to two tasks that may both
// still hold it (the harness checks invariant 6 after every entry).
func TestNoDuplicateAddressAcrossRestarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	h := newHarness(t, Config{Group: 1})
	h.addNodes(3)
	h.network("net", "10.7.0.0/27")
	for round := 0; round < 60; round++ {
		name := fmt.Sprintf("svc%d", rng.IntN(3))
		switch op := rng.IntN(6); {
		case op == 0 && h.s.ServiceByName(name) == nil:
			h.apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: name, Replicas: uint32(1 + rng.IntN(6)), Networks: []string{"net"}}})
		case op == 1:
			h.apply(Command{Kind: CmdRemoveService, Name: name})
		case op == 2:
			h.placeAll(3)
		default:
			var cmds []Command
			for _, id := range h.s.TaskIDs() {
				x := h.s.Task(id)
				if x.Status.State < StateAssigned || x.Status.State.Terminal() {
					continue
				}
				switch {
				case x.Desired.Stopping():
					cmds = append(cmds, Command{Kind: CmdTaskStatus, Task: id, Node: x.Node, State: StateShutdown})
				case rng.IntN(3) == 0:
					cmds = append(cmds, Command{Kind: CmdTaskStatus, Task: id, Node: x.Node, State: StateFailed})
				}
			}
			for _, nid := range h.s.NodeIDs() {
				var holds []TaskID
				for _, x := range h.s.NodeTasks(nid) {
					if !x.Status.State.Terminal() || rng.IntN(4) == 0 {
						holds = append(holds, x.ID)
					}
				}
				seq := h.s.Node(nid).AssignSeq
				seq -= uint64(rng.IntN(int(min(seq, 3)) + 1)) // sometimes stale
				cmds = append(cmds, Command{Kind: CmdNodeSync, Node: nid, Seq: seq, Tasks: holds})
			}
			h.apply(cmds...)
		}
		loaded := saveLoad(t, h.s)
		if loaded.Hash() != h.s.Hash() {
			t.Fatalf("round %d: save/load changed the state", round)
		}
		h.s = loaded
	}
}

func TestSyncAnswerDestroysWhatIsNotAssigned(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3}})
	h.placeAll(2)
	ts := h.tasksIn("web")
	var on1, on2 []TaskID
	for _, x := range ts {
		if x.Node == 1 {
			on1 = append(on1, x.ID)
		} else {
			on2 = append(on2, x.ID)
		}
	}
	h.ok(Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "web", Replicas: 1}}) // slots 2, 3 flagged remove
	gone := TaskID(1<<48 | 999)
	holds := append(append([]TaskID{gone}, on1...), on2[0])
	got := h.s.SyncAnswer(1, holds)
	want := map[TaskID]bool{gone: true, on2[0]: true}
	for _, id := range on1 {
		if h.s.Task(id).Desired.Stopping() {
			want[id] = true
		}
	}
	if len(got) != len(want) {
		t.Fatalf("destroy %v, want %v", got, want)
	}
	for _, id := range got {
		if !want[id] {
			t.Fatalf("destroy %v includes %d, which node 1 should keep", got, id)
		}
	}
}

// TestUpdateOfUnplacedTasksOnFullNetwork: addresses freed by deleting tasks
// no node saw go to the tasks waiting for them (found by the model checker:
// a rolling update of unplaced tasks on a full network left the
// replacements new for good).
func TestUpdateOfUnplacedTasksOnFullNetwork(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	// two task addresses beside the VIP's: .1 gateway, .5-.6 reserved
	h.ok(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.0.0.0/29", Reserved: []string{"10.0.0.5-10.0.0.6"}}})
	spec := ServiceSpec{Name: "web", Replicas: 2, Networks: []string{"net"}}
	h.ok(Command{Kind: CmdCreateService, Spec: &spec})
	spec.Image = "v2"
	h.ok(Command{Kind: CmdUpdateService, Spec: &spec})
	for _, tk := range h.tasksIn("web") {
		if tk.Status.State != StatePending || len(tk.Attachments) != 1 {
			t.Fatalf("task %d is %s with %d addresses, want pending with one (the originals freed theirs)", tk.ID, tk.Status.State, len(tk.Attachments))
		}
	}
}

// A sync may skip its commit only where the commit would change nothing:
// whenever SyncNeedsCommit says no, applying the sync leaves the state as
// it was; with an address in quarantine on the node, or a sequence this
// state has not reached, it says yes.
func TestSyncNeedsCommitOnlyWhenItChangesSomething(t *testing.T) {
	h := webOn(t, "10.0.0.0/24", 2)
	noop := func(when string, tasks []TaskID) {
		t.Helper()
		seq := h.s.Node(1).AssignSeq
		if h.s.SyncNeedsCommit(1, seq) {
			t.Fatalf("%s: a sync with nothing in quarantine needs a commit", when)
		}
		// The same entry with and without the sync: only the sync differs.
		with, without := h.s.Clone(), h.s.Clone()
		var out Output
		with.Apply([]Command{{Kind: CmdNodeSync, Node: 1, Seq: seq, Tasks: tasks}}, h.index+1, h.now+1, &out)
		without.Apply(nil, h.index+1, h.now+1, &out)
		if !bytes.Equal(with.Canonical(), without.Canonical()) {
			t.Fatalf("%s: a sync said to need no commit changed the state", when)
		}
	}
	ts := h.tasksIn("web")
	noop("placed", []TaskID{ts[0].ID, ts[1].ID})
	if !h.s.SyncNeedsCommit(1, h.s.Node(1).AssignSeq+1) {
		t.Fatal("a sequence this state has not applied needs no commit")
	}
	if !h.s.SyncNeedsCommit(9, 1) {
		t.Fatal("an unknown node's sync needs no commit")
	}
	h.ok(Command{Kind: CmdTaskStatus, Task: ts[0].ID, Node: 1, State: StateFailed})
	if !h.s.SyncNeedsCommit(1, h.s.Node(1).AssignSeq) {
		t.Fatal("a sync that confirms a release needs no commit")
	}
	h.ok(Command{Kind: CmdNodeSync, Node: 1, Seq: h.s.Node(1).AssignSeq, Tasks: []TaskID{ts[1].ID}})
	if p := h.pool("net"); p.Quarantined() != 0 {
		t.Fatalf("%d still quarantined after the confirming sync", p.Quarantined())
	}
	noop("after the release was confirmed", []TaskID{ts[1].ID})
}
