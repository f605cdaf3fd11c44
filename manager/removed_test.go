package manager

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"shoal/statemachine"
	"shoal/wire"
)

// A removed node is refused on the connections it already holds: its
// heartbeats went through on them (the connection keeps that its node was
// not removed), and after the removal every one of its calls there is
// answered node_removed. The replica is real (Raft, the feed, the
// handshake turns), as `serve` wires it.
func TestRemovedNodeRefusedOnItsConnection(t *testing.T) {
	c := startSecure(t, secureOpts{n: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := c.admin(1)
	node, ac, _ := c.joinWorker(ctx, 1, "leaving")
	kept, keptAC, _ := c.joinWorker(ctx, 1, "staying")
	sess, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "leaving"}})
	if err != nil {
		t.Fatal(err)
	}
	keptSess, err := keptAC.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "staying"}})
	if err != nil {
		t.Fatal(err)
	}
	beat := func() error {
		_, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: statemachine.NodeID(node), SessionID: sess.SessionID})
		return err
	}
	beatKept := func() error {
		_, err := keptAC.Heartbeat(ctx, &wire.Heartbeat{NodeID: statemachine.NodeID(kept), SessionID: keptSess.SessionID})
		return err
	}
	for range 5 {
		if err := beat(); err != nil {
			t.Fatalf("heartbeat before the removal: %v", err)
		}
		if err := beatKept(); err != nil {
			t.Fatalf("the other node's heartbeat: %v", err)
		}
	}
	// The node monitor's part: the node is down; then it is removed.
	if _, err := c.ms[0].sub.Submit(ctx, statemachine.Command{Kind: statemachine.CmdSetNodeStatus,
		Node: statemachine.NodeID(node), NodeStatus: statemachine.NodeDown}); err != nil {
		t.Fatal(err)
	}
	if err := admin.RemoveNode(ctx, strconv.FormatUint(node, 10)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		var we *wire.Error
		if err := beat(); !errors.As(err, &we) || we.Code != wire.CodeNodeRemoved {
			t.Fatalf("heartbeat %d after the removal: %v, want %s", i, err, wire.CodeNodeRemoved)
		}
		if _, err := ac.Sync(ctx, &wire.SyncRequest{SessionID: sess.SessionID}); !errors.As(err, &we) || we.Code != wire.CodeNodeRemoved {
			t.Fatalf("sync %d after the removal: %v, want %s", i, err, wire.CodeNodeRemoved)
		}
		if err := beatKept(); err != nil {
			t.Fatalf("the other node's heartbeat after the removal: %v", err)
		}
	}
}
