package manager

import (
	"fmt"
	"testing"
	"time"

	"shoal/statemachine"
)

// Start runs the outbox duty on the cluster group's leader: a node
// submitted without waiting for the fan-out (a worker's join) returns once
// the cluster group has it, and the duty brings it to every service group
// on its own. (What the Submitter and the duty do is control's script
// submit-removal-precheck-and-delivery and duty's tests.)
func TestNodeReachesEveryGroupWithoutTheSubmitterDelivering(t *testing.T) {
	c := startCluster(t, 1)
	ctx := ctxT(t)
	e := c.ms[0].E
	res, err := e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdReserveNodeID})
	if err != nil {
		t.Fatal(err)
	}
	id := statemachine.NodeID(res.ID)
	spec := &statemachine.Node{ID: id, Name: "joiner", Role: statemachine.RoleWorker, Status: statemachine.NodeReady}
	if _, err := c.ms[0].sub.SubmitBeforeFanout(ctx, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: spec}); err != nil {
		t.Fatalf("submit the node: %v", err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, m := range c.ms {
			for g := 0; g <= m.E.Groups(); g++ {
				var known bool
				if err := m.E.ReadLocal(g, func(s *statemachine.State) { known = s.Node(id) != nil }); err != nil || !known {
					return false, fmt.Sprintf("replica %d group %d does not know node %d yet (%v)", m.E.ReplicaID(), g, id, err)
				}
			}
		}
		return true, ""
	})
}
