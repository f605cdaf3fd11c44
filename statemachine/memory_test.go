package statemachine

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// Every history entry the decoder accepts (each field within its enum)
// comes back from the packed ring as it went in.
func TestHistoryPackingKeepsEveryEntry(t *testing.T) {
	n := 0
	for st := range numTaskStates {
		for k := HistTransition; k <= HistLost; k++ {
			for by := range numComponents {
				for d := range numDesiredStates {
					e := HistoryEntry{At: int64(n)*7919 - 1_000_000, State: st, Kind: k, By: by, Desired: d}
					var h History
					h.add(HistoryEntry{At: 1})
					h.add(e)
					if got := h.At(1); got != e {
						t.Fatalf("added %+v, read %+v", e, got)
					}
					n++
				}
			}
		}
	}
	// A full ring keeps the newest historyCap entries, oldest first.
	var h History
	for i := range 3 * historyCap {
		h.add(HistoryEntry{At: int64(i), State: TaskState(i % int(numTaskStates))})
	}
	for i := range historyCap {
		if e := h.At(i); e.At != int64(2*historyCap+i) || e.State != TaskState((2*historyCap+i)%int(numTaskStates)) {
			t.Fatalf("entry %d of a full ring is %+v", i, e)
		}
	}
	// The ring's start and length share bits with the entries: changing
	// the oldest entry keeps them, and they keep the entries.
	h.setFirstDesired(DesiredReady)
	if h.Len() != historyCap || h.At(0).Desired != DesiredReady || h.At(0).At != int64(2*historyCap) || h.At(1).Desired != 0 {
		t.Fatalf("after setFirstDesired on a full ring: len %d, first %+v, second %+v", h.Len(), h.At(0), h.At(1))
	}
}

// A task stays within the allocator's 160-byte size class (it was 256,
// then 192, then 176): a million tasks per replica. Its message and start
// times, which few tasks have, are a record aside (Task.extra).
func TestTaskFitsItsSizeClass(t *testing.T) {
	if sz := unsafe.Sizeof(Task{}); sz > 160 {
		t.Fatalf("a task takes %d bytes, more than 160", sz)
	}
}

// A slot (one per task of a replicated service) stays within the
// allocator's 24-byte size class, its one task held in place: it was a
// slice header beside a one-task array, 48 bytes (and 32 plus an 8-byte
// array before that). Its rolling-update part is its service's, and only
// while an update walks it.
func TestSlotFitsItsSizeClass(t *testing.T) {
	if sz := unsafe.Sizeof(slot{}); sz > 24 {
		t.Fatalf("a slot takes %d bytes, more than 24", sz)
	}
}

// A task on one network is one object with its attachment's array, in
// the allocator's 176-byte class (192 with the message and start times
// in the task).
func TestTaskWithRoomFitsItsSizeClass(t *testing.T) {
	if sz := unsafe.Sizeof(taskWithRoom{}); sz > 176 {
		t.Fatalf("a task with room for an attachment takes %d bytes, more than 176", sz)
	}
}

// An Output keeps room for the next entry's results and effects, but not
// a huge batch's for good.
func TestOutputDropsHugeRoom(t *testing.T) {
	var o Output
	o.Effects = make([]Effect, 10, 100)
	o.Results = make([]Result, keptOutput+1)
	o.reset()
	if len(o.Effects) != 0 || cap(o.Effects) != 100 || o.Results != nil {
		t.Fatalf("after reset: effects %d/%d, results %d/%d; want 0/100 and none", len(o.Effects), cap(o.Effects), len(o.Results), cap(o.Results))
	}
}

// Nodes with equal labels share one map (a 10,000-node fleet has a few
// label sets), in a live state, its clone and a loaded snapshot; giving a
// node new labels leaves the others' as they were.
func TestNodesShareEqualLabels(t *testing.T) {
	h := newHarness(t, Config{})
	node := func(id NodeID, labels map[string]string) {
		h.ok(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: id, Name: fmt.Sprintf("n%d", id), Labels: labels}})
	}
	node(1, map[string]string{"zone": "z1", "sim": "sim"})
	node(2, map[string]string{"sim": "sim", "zone": "z1"})
	node(3, map[string]string{"zone": "z2", "sim": "sim"})
	node(4, nil)
	same := func(s *State, a, b NodeID) bool {
		return reflect.ValueOf(s.Node(a).Labels).UnsafePointer() == reflect.ValueOf(s.Node(b).Labels).UnsafePointer()
	}
	for name, s := range map[string]*State{"live": h.s, "clone": h.s.Clone(), "loaded": saveLoad(t, h.s)} {
		if !same(s, 1, 2) || same(s, 1, 3) {
			t.Fatalf("%s: nodes 1 and 2 (equal labels) share a map: %v; nodes 1 and 3 (different): %v", name, same(s, 1, 2), same(s, 1, 3))
		}
	}
	if l := h.s.Node(4).Labels; l == nil || len(l) != 0 {
		t.Fatalf("a node upserted without labels has %#v, want an empty map", l)
	}
	node(2, map[string]string{"zone": "z3"})
	if got := h.s.Node(1).Labels; len(got) != 2 || got["zone"] != "z1" || got["sim"] != "sim" {
		t.Fatalf("node 1's labels became %v when node 2 was relabelled", got)
	}
	if got := h.s.Node(2).Labels; len(got) != 1 || got["zone"] != "z3" {
		t.Fatalf("node 2's labels are %v, want zone=z3", got)
	}
}

// The waiting tasks of a service on a full network all say why, and
// share one record for it (Task.extra): not one allocation per waiting
// task. A task placed later drops it; a snapshot's copy says the same.
func TestWaitingTasksShareTheirMessage(t *testing.T) {
	s := New(Config{Group: 1})
	var out Output
	apply := func(cmds ...Command) {
		mustApply(t, s, &out, cmds...)
	}
	apply(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 1, Name: "node-1"}})
	apply(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/28"}})
	apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 200, Networks: []string{"net"}}})
	records := map[*taskExtra]int{}
	waiting := 0
	for _, id := range s.TaskIDs() {
		tk := s.Task(id)
		if tk.Status.State != StateNew {
			if tk.Message() != "" {
				t.Fatalf("task %d is %s and still says %q", id, tk.Status.State, tk.Message())
			}
			continue
		}
		waiting++
		if tk.Message() == "" {
			t.Fatalf("waiting task %d says nothing", id)
		}
		records[tk.extra]++
	}
	if waiting < 150 || len(records) > 2 {
		t.Fatalf("%d waiting tasks hold %d message records; want them shared (at most 2)", waiting, len(records))
	}
	c := s.Clone()
	if !bytes.Equal(c.Canonical(), s.Canonical()) {
		t.Fatal("a clone encodes differently")
	}
}

// mustApply applies cmds as s's next entry, a millisecond after its last,
// and fails t on any command refused.
func mustApply(t testing.TB, s *State, out *Output, cmds ...Command) {
	t.Helper()
	s.Apply(cmds, s.LastIndex()+1, s.LastTime()+1e6, out)
	for i, r := range out.Results {
		if r.Code != CodeOK {
			t.Fatalf("command %d (%s): %v", i, cmds[i].Kind, r.Err())
		}
	}
}
