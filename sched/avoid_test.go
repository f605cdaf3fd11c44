package sched

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestAvoidRanksLast checks the property of Request.Avoid: a node named in
// Avoid gets a task only if, after the placement, no filtered node outside
// Avoid could take one more, and Avoid never changes how many tasks are
// placed. When the avoided nodes get nothing and there are no preferences,
// the placement is the one that excludes them by constraint.
func TestAvoidRanksLast(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		if len(c.nodes) == 0 {
			t.Skip("no nodes")
		}
		g := genGroup(t, c)
		seed := rapid.Uint64().Draw(t, "seed")
		ids := make([]uint32, len(c.nodes))
		for i, n := range c.nodes {
			ids[i] = n.ID
		}
		avoid := rapid.SliceOfDistinct(rapid.SampledFrom(ids), rapid.ID[uint32]).Draw(t, "avoid")
		avoid = append(avoid, rapid.SliceOf(rapid.Uint32Range(5001, 5003)).Draw(t, "unknown")...) // nodes the table lacks

		plain, _ := mustTable(t, c).Place(g, seed)
		tb := mustTable(t, c)
		ga := g
		ga.Avoid = avoid
		p, _ := tb.Place(ga, seed)
		if p.Placed != plain.Placed {
			t.Fatalf("avoiding %v placed %d tasks, %d without", avoid, p.Placed, plain.Placed)
		}
		one := g
		one.Count = 1
		avoided := 0
		for i, id := range p.Nodes {
			if slices.Contains(avoid, id) {
				avoided += int(p.Counts[i])
			}
		}
		if avoided > 0 {
			for _, id := range ids {
				if !slices.Contains(avoid, id) && tb.CheckNode(one, id) == nil {
					t.Fatalf("%d tasks went to avoided nodes %v while node %d still takes one: %v", avoided, avoid, id, asMap(p))
				}
			}
			return
		}
		if len(g.Preferences) > 0 {
			return
		}
		gc := g
		gc.Constraints = slices.Clone(g.Constraints)
		for _, id := range avoid {
			gc.Constraints = append(gc.Constraints, MustParseConstraints(fmt.Sprintf("node.id!=%d", id))...)
		}
		want, _ := mustTable(t, c).Place(gc, seed)
		if got, w := asMap(p), asMap(want); !maps.Equal(got, w) {
			t.Fatalf("avoiding %v gave %v, excluding them gave %v", avoid, got, w)
		}
	})
}

// TestAvoidUsedWhenNothingElseFits: a task whose only node with room is
// avoided is still placed there, and the other tasks go elsewhere first.
func TestAvoidUsedWhenNothingElseFits(t *testing.T) {
	tb, err := NewTableFrom([]Node{
		{ID: 1, Status: StatusReady, CPU: 1000},
		{ID: 2, Status: StatusReady, CPU: 1000},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tb.Place(Request{Service: 7, Count: 3, CPU: 500, Avoid: []uint32{1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := asMap(p); got[2] != 2 || got[1] != 1 {
		t.Fatalf("placement %v, want 2 on node 2 (not avoided) and 1 on node 1", got)
	}
}
