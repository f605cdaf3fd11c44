package api

import (
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/manager/control"
	"shoal/statemachine"
)

// A connection keeps whether its node was removed with the feed's NodeGen,
// and reads the state again once that moved: after an applied removal (the
// feed's OnApply) and after a state replaced by a snapshot (Raise). A
// request on a connection that keeps nothing reads the state every time.
func TestRemovedNodeKeptPerConnection(t *testing.T) {
	st := statemachine.New(statemachine.Config{})
	index := uint64(0)
	apply := func(cmds ...statemachine.Command) []statemachine.Effect {
		t.Helper()
		var out statemachine.Output
		index++
		st.Apply(cmds, index, 1_700_000_000e9, &out)
		for _, r := range out.Results {
			if r.Code != statemachine.CodeOK {
				t.Fatalf("%+v", r)
			}
		}
		return out.Effects
	}
	remove := func(n statemachine.NodeID) []statemachine.Effect {
		return apply(statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: n, NodeStatus: statemachine.NodeDown},
			statemachine.Command{Kind: statemachine.CmdRemoveNode, Node: n})
	}
	apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 1, Name: "n1", Status: statemachine.NodeReady}},
		statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 2, Name: "n2", Status: statemachine.NodeReady}},
		statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 3, Name: "n3", Status: statemachine.NodeReady}})
	r := &replica{st: st, leader: 1}
	feed := control.NewFeed(1, nil, 16, 16)
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: feed, Monitor: beats{ttl: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	onConn := func(c *admittedConn) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.Init2(c, nil, false)
		return &ctx
	}
	one, two := onConn(&admittedConn{}), onConn(&admittedConn{})
	if s.nodeRemoved(one, 1) || s.nodeRemoved(two, 2) {
		t.Fatal("a node is removed before its removal")
	}

	// Removed in the state, the feed not told yet: the connection's answer
	// stands (the state is not read again)...
	effects := remove(1)
	if s.nodeRemoved(one, 1) {
		t.Fatal("the connection read the state again while NodeGen stood still")
	}
	// ...until the feed sees the entry.
	feed.OnApply(0, index, effects)
	if !s.nodeRemoved(one, 1) {
		t.Fatal("node 1 was removed, and its connection still passes it")
	}
	if s.nodeRemoved(two, 2) {
		t.Fatal("node 2 is refused for node 1's removal")
	}

	// A snapshot replaced the state (node 2 removed in it): Raise.
	remove(2)
	feed.Raise(0, index)
	if !s.nodeRemoved(two, 2) {
		t.Fatal("node 2 was removed in a restored state, and its connection still passes it")
	}

	// A connection that keeps nothing reads the state each time.
	remove(3)
	var plain fasthttp.RequestCtx
	if !s.nodeRemoved(&plain, 3) {
		t.Fatal("node 3 was removed, and a request with no kept answer passes it")
	}
}

// failingReads is a replica whose local reads fail while down.
type failingReads struct {
	*replica
	down bool
}

func (f *failingReads) ReadLocal(g int, fn func(*statemachine.State)) error {
	if f.down {
		return errors.New("the group is not ready on this replica")
	}
	return f.replica.ReadLocal(g, fn)
}

// A read of the state that failed tells nothing: the connection keeps no
// answer from it, and reads again at its next request (even while the
// feed's NodeGen has not moved).
func TestRemovedNodeNotKeptFromAFailedRead(t *testing.T) {
	st := statemachine.New(statemachine.Config{})
	var out statemachine.Output
	st.Apply([]statemachine.Command{
		{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 1, Name: "n1", Status: statemachine.NodeDown}},
	}, 1, 1_700_000_000e9, &out)
	st.Apply([]statemachine.Command{{Kind: statemachine.CmdRemoveNode, Node: 1}}, 2, 1_700_000_000e9, &out)
	if !st.NodeRemoved(1) {
		t.Fatal("node 1 is not removed in the state")
	}
	r := &failingReads{replica: &replica{st: st, leader: 1}, down: true}
	feed := control.NewFeed(1, nil, 16, 16)
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: feed, Monitor: beats{ttl: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ctx fasthttp.RequestCtx
	ctx.Init2(&admittedConn{}, nil, false)
	s.nodeRemoved(&ctx, 1) // the read fails
	r.down = false
	if !s.nodeRemoved(&ctx, 1) {
		t.Fatal("a removed node passes on a connection that kept the answer of a failed read")
	}
}
