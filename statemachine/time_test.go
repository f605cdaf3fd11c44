package statemachine

import (
	"bytes"
	"testing"
)

// Time in the state never goes backwards: an entry stamped before the last
// applied one applies at the last applied time, and a state loaded from a
// snapshot keeps that floor, so it clamps the next entry exactly as the
// state that never stopped does.
func TestTimeNeverGoesBackwards(t *testing.T) {
	h := newHarness(t, Config{Group: 0})
	h.addNodes(1)
	last := h.s.LastTime()
	if last != h.now {
		t.Fatalf("LastTime %d after an entry stamped %d", last, h.now)
	}
	var buf bytes.Buffer
	if err := h.s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	loaded := New(Config{})
	if err := loaded.Load(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if loaded.LastTime() != last {
		t.Fatalf("loaded LastTime %d, saved %d", loaded.LastTime(), last)
	}

	// A proposer whose clock is an hour behind marks the node down.
	behind := last - 3600e9
	cmd := []Command{{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown}}
	var o1, o2 Output
	h.s.Apply(cmd, h.index+1, behind, &o1)
	loaded.Apply(cmd, h.index+1, behind, &o2)
	for _, s := range []*State{h.s, loaded} {
		if s.LastTime() != last {
			t.Fatalf("LastTime moved from %d to %d on an entry stamped %d", last, s.LastTime(), behind)
		}
		if at := s.Node(1).StatusAt; at != last {
			t.Fatalf("node status stamped %d, want the last applied time %d", at, last)
		}
	}
	if loaded.Hash() != h.s.Hash() {
		t.Fatal("the loaded state clamped differently from the original")
	}

	// A later stamp moves time forward again; a replay moves nothing.
	h.s.Apply(nil, h.index+2, last+5, &o1)
	if h.s.LastTime() != last+5 {
		t.Fatalf("LastTime %d, want %d", h.s.LastTime(), last+5)
	}
	h.s.Apply(nil, h.index+2, last+99, &o1)
	if h.s.LastTime() != last+5 {
		t.Fatalf("a replayed entry moved LastTime to %d", h.s.LastTime())
	}
}

// A version-1 snapshot (no recorded time) still loads, with time 0.
func TestLoadVersion1Snapshot(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	canon := h.s.Canonical()
	// Version 2 is version 3 without the outbox and lease state at the end
	// (nor the join keys of version 5, nor the request records of 6).
	var rd encoder
	h.s.encodeRedrive(&rd)
	h.s.encodeJoinKeys(&rd)
	h.s.encodeRequests(&rd)
	canon = canon[:len(canon)-len(rd.b)]
	// Version 1 is version 2 without the time after the last index.
	var head encoder
	head.u(uint64(h.s.cfg.Group))
	head.u(uint64(h.s.cfg.Groups))
	head.u(uint64(h.s.cfg.HistoryRetention))
	head.bool(h.s.cfg.ManualReactions)
	head.u(h.s.LastIndex())
	var tm encoder
	tm.i(h.s.LastTime())
	at := len(snapshotMagic) + len(head.b)
	v1 := append([]byte(snapshotMagicV1), head.b...)
	v1 = append(v1, canon[at+len(tm.b):]...)
	s, err := FromCanonical(v1)
	if err != nil {
		t.Fatal(err)
	}
	if s.LastTime() != 0 || s.LastIndex() != h.s.LastIndex() || s.Node(1) == nil {
		t.Fatalf("version 1 load: time %d index %d node %v", s.LastTime(), s.LastIndex(), s.Node(1))
	}
}
