package duty

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"shoal/sched"
	"shoal/statemachine"
)

// TestPlan is the plan's value function over hand-built tables: nodes and
// pending batches in, per-task nodes and reasons out.
func TestPlan(t *testing.T) {
	node := func(id uint32, zone string, cpu int64, st sched.NodeStatus, av sched.Availability) sched.Node {
		return sched.Node{ID: id, Hostname: fmt.Sprintf("n%d", id), Status: st, Availability: av,
			CPU: cpu, Mem: 1 << 30, Labels: map[string]string{"zone": zone}}
	}
	ready := func(id uint32, zone string) sched.Node {
		return node(id, zone, 4000, sched.StatusReady, sched.AvailabilityActive)
	}
	type want struct {
		nodes []uint32 // per task, in task order; 0: left pending
		err   error    // the batch's reason, if any tasks stay pending
	}
	cases := []struct {
		name    string
		nodes   []sched.Node
		batches []*batch
		want    []want // per batch
	}{{
		name:    "spread evenly",
		nodes:   []sched.Node{ready(1, "a"), ready(2, "a"), ready(3, "b")},
		batches: []*batch{testBatch(1, 6, 0, nil)},
		want:    []want{{nodes: []uint32{1, 1, 2, 2, 3, 3}}},
	}, {
		name:    "constraint keeps tasks in zone b",
		nodes:   []sched.Node{ready(1, "a"), ready(2, "b"), ready(3, "b")},
		batches: []*batch{testBatch(1, 2, 0, []string{"node.labels.zone==b"})},
		want:    []want{{nodes: []uint32{2, 3}}},
	}, {
		name: "drained, paused and down nodes take nothing",
		nodes: []sched.Node{ready(1, "a"), node(2, "a", 4000, sched.StatusReady, sched.AvailabilityDrain),
			node(3, "a", 4000, sched.StatusReady, sched.AvailabilityPause), node(4, "a", 4000, sched.StatusDown, 0)},
		batches: []*batch{testBatch(1, 2, 0, nil)},
		want:    []want{{nodes: []uint32{1, 1}}},
	}, {
		name:    "too big: one per node, the rest pending with the reason",
		nodes:   []sched.Node{ready(1, "a"), ready(2, "a")},
		batches: []*batch{testBatch(1, 3, 3000, nil)},
		want:    []want{{nodes: []uint32{1, 2, 0}, err: sched.ErrNoSuitableNode}},
	}, {
		name:  "global tasks go to their own node, first",
		nodes: []sched.Node{node(1, "a", 100, sched.StatusReady, 0), ready(2, "a")},
		batches: []*batch{testBatch(1, 1, 100, nil),
			globalBatch(2, []uint32{1, 2}, 100)},
		// The global task on node 1 takes its last 100 mcpu; the replicated
		// one then only fits node 2.
		want: []want{{nodes: []uint32{2}}, {nodes: []uint32{1, 2}}},
	}, {
		name:    "global task on a down node stays pending",
		nodes:   []sched.Node{ready(1, "a"), node(2, "a", 4000, sched.StatusDown, 0)},
		batches: []*batch{globalBatch(1, []uint32{1, 2}, 0)},
		want:    []want{{nodes: []uint32{1, 0}, err: sched.ErrNodeUnsuitable}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := sched.NewTable()
			for _, n := range c.nodes {
				table.UpsertNode(n)
			}
			p := makePlan(table, c.batches, 0, nil)
			got := map[statemachine.TaskID]uint32{}
			for _, cmd := range p.commands(nil) {
				got[cmd.Task] = uint32(cmd.Node)
			}
			for i, b := range c.batches {
				var nodes []uint32
				for _, task := range b.tasks {
					nodes = append(nodes, got[task])
				}
				// Which task lands where within a batch is the placer's
				// business; compare the multiset.
				slices.Sort(nodes)
				w := slices.Clone(c.want[i].nodes)
				slices.Sort(w)
				if !slices.Equal(nodes, w) {
					t.Errorf("batch %d: nodes %v, want %v", i, nodes, w)
				}
				if err := p.why[b.batchKey]; !errors.Is(err, c.want[i].err) || (err == nil) != (c.want[i].err == nil) {
					t.Errorf("batch %d: reason %v, want %v", i, err, c.want[i].err)
				}
			}
			un := p.unschedulable(c.batches)
			for _, u := range un {
				if u.Pending == 0 || reasonOf(u.Err) == "" {
					t.Errorf("unschedulable %+v with nothing pending", u)
				}
			}
		})
	}
}

// testBatch is a replicated batch of n tasks of service key svc.
func testBatch(svc uint32, n int, cpu int64, constraints []string) *batch {
	b := &batch{batchKey: batchKey{group: 1, service: statemachine.ServiceID(svc), version: 1},
		name: fmt.Sprintf("svc%d", svc), sg: sched.Request{Service: svc, SpecVersion: 1, CPU: cpu}}
	b.sg.Constraints, b.perr = sched.ParseConstraints(constraints)
	for i := range n {
		b.tasks = append(b.tasks, statemachine.TaskID(1<<48|uint64(svc)<<20|uint64(i+1)))
	}
	return b
}

// globalBatch is a global batch with one task per listed node.
func globalBatch(svc uint32, nodes []uint32, cpu int64) *batch {
	b := testBatch(svc, len(nodes), cpu, nil)
	b.global, b.slots = true, nodes
	return b
}
