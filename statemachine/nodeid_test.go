package statemachine

import "testing"

// Property: the cluster group never hands out a node ID that a node has, or
// had, and the next ID (like the manager addresses) survives a snapshot.
func TestReserveNodeIDNeverReuses(t *testing.T) {
	s := New(Config{Group: 0, Groups: 2})
	var out Output
	idx := uint64(0)
	apply := func(cs ...Command) []Result {
		idx++
		s.Apply(cs, idx, int64(idx), &out)
		return append([]Result(nil), out.Results...)
	}
	r := apply(Command{Kind: CmdReserveNodeID}, Command{Kind: CmdReserveNodeID})
	if r[0].ID != 1 || r[1].ID != 2 {
		t.Fatalf("first reservations = %d, %d; want 1, 2", r[0].ID, r[1].ID)
	}
	apply(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 7, Name: "n7", Status: NodeDown}})
	apply(Command{Kind: CmdRemoveNode, Node: 7})
	apply(Command{Kind: CmdSetManager, Seq: 2, Name: "127.0.0.1:7702"})
	s = saveLoad(t, s)
	if got := s.Managers()[2]; got != "127.0.0.1:7702" {
		t.Fatalf("manager 2's address after a snapshot = %q", got)
	}
	if got := apply(Command{Kind: CmdReserveNodeID})[0]; got.ID != 8 {
		t.Fatalf("after node 7 existed and was removed, reserved %d; want 8", got.ID)
	}
	if got := apply(Command{Kind: CmdReserveNetworkID}, Command{Kind: CmdReserveNetworkID}); got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("network reservations = %d, %d; want 1, 2", got[0].ID, got[1].ID)
	}
	svc := New(Config{Group: 1, Groups: 2})
	svc.Apply([]Command{{Kind: CmdReserveNodeID}}, 1, 1, &out)
	if out.Results[0].Code != CodeInvalid {
		t.Fatalf("a service group reserved a node ID: %+v", out.Results[0])
	}
}

// Property: an update carrying a stale modify index changes nothing.
func TestUpdateServiceCompareAndSet(t *testing.T) {
	s := New(Config{Group: 1, Groups: 1})
	var out Output
	s.Apply([]Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 1}}}, 5, 1, &out)
	if got := s.ServiceByName("web").ModifyIndex; got != 5 {
		t.Fatalf("modify index after create at 5 = %d", got)
	}
	s.Apply([]Command{{Kind: CmdUpdateService, Seq: 4, Spec: &ServiceSpec{Name: "web", Replicas: 3}}}, 6, 2, &out)
	if out.Results[0].Code != CodeStale || s.ServiceByName("web").Spec.Replicas != 1 {
		t.Fatalf("stale update: result %+v, replicas %d", out.Results[0], s.ServiceByName("web").Spec.Replicas)
	}
	s.Apply([]Command{{Kind: CmdUpdateService, Seq: 5, Spec: &ServiceSpec{Name: "web", Replicas: 3}}}, 7, 3, &out)
	if out.Results[0].Code != CodeOK || s.ServiceByName("web").Spec.Replicas != 3 || s.ServiceByName("web").ModifyIndex != 7 {
		t.Fatalf("current update: result %+v, service %+v", out.Results[0], s.ServiceByName("web"))
	}
}
