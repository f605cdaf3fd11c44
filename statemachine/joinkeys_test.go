package statemachine

import "testing"

// A node ID reserved with a joiner's key is handed out again for that key
// (not for another key or none), also after a snapshot; once the node is
// removed, the key reserves a fresh ID. A format-4 snapshot loads with no
// keys.
func TestJoinKeyReservesOneNode(t *testing.T) {
	h := newHarness(t, Config{Group: 0})
	reserve := func(key string) NodeID {
		t.Helper()
		r := h.apply(Command{Kind: CmdReserveNodeID, Name: key})[0]
		if r.Err() != nil || r.ID == 0 {
			t.Fatalf("reserve %q: %+v", key, r)
		}
		return NodeID(r.ID)
	}
	a := reserve("key-a")
	if again := reserve("key-a"); again != a {
		t.Fatalf("key-a reserved %d, then %d", a, again)
	}
	b, none := reserve("key-b"), reserve("")
	if b == a || none == a || none == b || reserve("") == none {
		t.Fatalf("distinct joiners share IDs: a=%d b=%d none=%d", a, b, none)
	}

	loaded := saveLoad(t, h.s)
	var out Output
	loaded.Apply([]Command{{Kind: CmdReserveNodeID, Name: "key-a"}}, h.s.LastIndex()+1, h.now+1, &out)
	if got := NodeID(out.Results[0].ID); got != a {
		t.Fatalf("after a snapshot, key-a reserved %d, want %d", got, a)
	}

	h.ok(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: a, Name: "n-a", Status: NodeDown}})
	h.ok(Command{Kind: CmdRemoveNode, Node: a})
	if again := reserve("key-a"); again == a {
		t.Fatalf("key-a reserved removed node %d again", a)
	}

	old := loadOlderFormat(t, h.s, snapshotMagicV4, func(e *encoder) { h.s.encodeJoinKeys(e); h.s.encodeRequests(e) })
	if len(old.joinKeys) != 0 || len(h.s.joinKeys) != 2 {
		t.Fatalf("join keys: %d from format 4 (want 0), %d live (want 2)", len(old.joinKeys), len(h.s.joinKeys))
	}
}
