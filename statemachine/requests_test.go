package statemachine

import (
	"bytes"
	"testing"
)

// A write with a request ID is applied at most once while the group
// remembers the ID: sent again (its answer was lost) it gets the first
// result and changes nothing; a refused write is not remembered, so it
// can be sent again; records survive a snapshot and are forgotten after
// RequestRetention.
func TestRequestIDAppliesAtMostOnce(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	create := Command{Kind: CmdCreateService, RequestID: "r-1", Spec: &ServiceSpec{Name: "web", Replicas: 2}}
	first := h.apply(create)[0]
	if first.Code != CodeOK {
		t.Fatalf("create: %+v", first)
	}
	rec, ok := h.s.Request("r-1")
	if !ok || rec.Index != h.index || rec.Result.ID != first.ID {
		t.Fatalf("record %+v (found %v), want index %d and service %d", rec, ok, h.index, first.ID)
	}
	modify := h.s.ServiceByName("web").ModifyIndex

	// The same request again: the recorded result, nothing applied.
	again := h.apply(create)[0]
	if again != first || h.s.ServiceByName("web").ModifyIndex != modify {
		t.Fatalf("a repeated request got %+v (first %+v) and modify index %d (was %d)",
			again, first, h.s.ServiceByName("web").ModifyIndex, modify)
	}

	// A refused write is not remembered: the same ID applies once the
	// write is valid.
	dup := Command{Kind: CmdCreateService, RequestID: "r-2", Spec: &ServiceSpec{Name: "web", Replicas: 1}}
	if r := h.apply(dup)[0]; r.Code != CodeExists {
		t.Fatalf("a second create of web: %+v", r)
	}
	if _, ok := h.s.Request("r-2"); ok {
		t.Fatal("a refused request was recorded")
	}
	dup.Spec = &ServiceSpec{Name: "api", Replicas: 1}
	if r := h.apply(dup)[0]; r.Code != CodeOK {
		t.Fatalf("the refused request's ID, now valid: %+v", r)
	}

	// A snapshot keeps the records; a format-5 snapshot has none.
	var buf bytes.Buffer
	if err := h.s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	loaded := New(Config{})
	if err := loaded.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if r, ok := loaded.Request("r-1"); !ok || r != rec {
		t.Fatalf("after a snapshot: %+v (found %v), want %+v", r, ok, rec)
	}
	old := loadOlderFormat(t, h.s, snapshotMagicV5, h.s.encodeRequests)
	if _, ok := old.Request("r-1"); ok || old.ServiceByName("api") == nil {
		t.Fatal("a format-5 snapshot did not load as one without request records")
	}

	// Forgotten once the state's time passes the retention.
	h.now += RequestRetention + 1
	h.apply(Command{Kind: CmdTick})
	if _, ok := h.s.Request("r-1"); ok {
		t.Fatal("a request older than the retention is still recorded")
	}
	if r := h.apply(create)[0]; r.Code != CodeExists {
		t.Fatalf("a forgotten request is checked afresh: %+v, want CodeExists", r)
	}
}
