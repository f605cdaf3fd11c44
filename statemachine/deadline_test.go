package statemachine

import (
	"bytes"
	"errors"
	"testing"
)

// A change never takes effect after its deadline: an entry that reaches
// the log once the state's time has passed its deadline is refused, each
// command with CodeExpired, identically on a replica that never stopped
// and on one restored from a snapshot; its index counts and nothing else
// changes. The entry's own (early) stamp does not count: the comparison
// is with the time the entries before it carried.
func TestExpiredEntryRefusedOnEveryReplica(t *testing.T) {
	h := newHarness(t, Config{Group: 0})
	h.addNodes(1)
	var buf bytes.Buffer
	if err := h.s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	other := New(Config{})
	if err := other.Load(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	last := h.s.LastTime()
	before := h.s.Hash()

	// Proposed 20 s ago with a 13 s deadline, arriving now.
	stamp, notAfter := last-20e9, last-7e9
	cmd := []Command{{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown}}
	idx := h.index + 1
	for _, s := range []*State{h.s, other} {
		var out Output
		s.ApplyEntry(cmd, idx, stamp, notAfter, &out)
		if len(out.Results) != 1 || out.Results[0].Code != CodeExpired {
			t.Fatalf("results %+v, want one CodeExpired", out.Results)
		}
		if !errors.Is(out.Results[0].Err(), ErrExpired) {
			t.Fatalf("error %v does not wrap ErrExpired", out.Results[0].Err())
		}
		if s.Node(1).Status == NodeDown {
			t.Fatal("an expired entry changed the node's status")
		}
		if s.LastIndex() != idx || s.LastTime() != last {
			t.Fatalf("index %d time %d after an expired entry, want %d and %d", s.LastIndex(), s.LastTime(), idx, last)
		}
	}
	if h.s.Hash() != other.Hash() {
		t.Fatal("the replicas refused the expired entry differently")
	}
	if h.s.Hash() == before {
		t.Fatal("the expired entry's index was not recorded")
	}

	// The same command before its deadline applies.
	var out Output
	h.s.ApplyEntry(cmd, idx+1, last, last+10e9, &out)
	if out.Results[0].Code != CodeOK || h.s.Node(1).Status != NodeDown {
		t.Fatalf("a command inside its deadline was not applied: %+v", out.Results)
	}
}
