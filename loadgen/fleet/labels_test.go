package fleet

import (
	"testing"

	"shoal/sched"
)

// OnlySimNodes is a constraint the scheduler accepts, every simulated node
// meets it, and a node without the label (a cluster's own) does not.
func TestOnlySimNodesKeepsTasksOnSimulatedNodes(t *testing.T) {
	c, err := sched.ParseConstraint(OnlySimNodes)
	if err != nil {
		t.Fatal(err)
	}
	for g := range 5 {
		if !c.MatchNode(uint32(g+1), "sim", "worker", simLabels(g)) {
			t.Fatalf("simulated node %d with labels %v does not meet %s", g, simLabels(g), OnlySimNodes)
		}
	}
	for _, labels := range []map[string]string{nil, {"zone": "z0"}, {SimLabel: "real"}} {
		if c.MatchNode(99, "vm", "worker", labels) {
			t.Fatalf("a node with labels %v meets %s", labels, OnlySimNodes)
		}
	}
}
