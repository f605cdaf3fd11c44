package sched

import (
	"cmp"
	"strings"

	"shoal/internal/mix"
)

// refCluster is the naive reference scheduler: it places one task at a
// time, scanning every node for each task. It shares only the definition of
// the tie order (groupSeed, mix64, hashString) and of load (share) with the
// fast scheduler.
type refCluster struct {
	nodes []*refNode
}

type refNode struct {
	Node
	cpuRes, memRes int64
	svc            map[uint32]int
	total          int
}

func newRefCluster(nodes []Node, tasks []Task) *refCluster {
	c := &refCluster{}
	byID := map[uint32]*refNode{}
	for _, n := range nodes {
		rn := &refNode{Node: n, svc: map[uint32]int{}}
		c.nodes = append(c.nodes, rn)
		byID[n.ID] = rn
	}
	for _, t := range tasks {
		n := byID[t.Node]
		n.cpuRes += t.CPU
		n.memRes += t.Mem
		n.svc[t.Service]++
		n.total++
	}
	return c
}

// filtered: ready, active and every constraint holds.
func (n *refNode) filtered(g Request) bool {
	if n.Status != StatusReady || n.Availability != AvailabilityActive {
		return false
	}
	for _, c := range g.Constraints {
		var eq bool
		switch c.Field {
		case FieldID:
			eq = n.ID == c.ID
		case FieldHostname:
			eq = n.Hostname == c.Value
		case FieldRole:
			eq = (n.Role == RoleManager) == (c.Role == RoleManager)
		case FieldLabel:
			v, ok := n.Labels[c.Key]
			eq = ok && v == c.Value
		}
		if eq != (c.Op == OpEq) {
			return false
		}
	}
	return true
}

// fits: filtered and one more task fits its free resources and max replicas.
func (n *refNode) fits(g Request) bool {
	return n.filtered(g) &&
		(g.CPU == 0 || n.CPU-n.cpuRes >= g.CPU) &&
		(g.Mem == 0 || n.Mem-n.memRes >= g.Mem) &&
		(g.MaxPerNode == 0 || n.svc[g.Service] < g.MaxPerNode)
}

type refBranch struct {
	missing bool
	value   string
	nodes   []*refNode
}

// place places g one task at a time and returns the tasks placed per node.
func (c *refCluster) place(g Request, seed uint64) map[uint32]int {
	gs := groupSeed(g, seed)
	got := map[uint32]int{}
	for range g.Count {
		var cands []*refNode
		for _, n := range c.nodes {
			if n.filtered(g) {
				cands = append(cands, n)
			}
		}
		for _, pref := range g.Preferences {
			key := strings.TrimPrefix(pref, "node.labels.")
			var branches []*refBranch
		nodes:
			for _, n := range cands {
				v, ok := n.Labels[key]
				for _, b := range branches {
					if b.missing == !ok && b.value == v {
						b.nodes = append(b.nodes, n)
						continue nodes
					}
				}
				branches = append(branches, &refBranch{missing: !ok, value: v, nodes: []*refNode{n}})
			}
			// The branch with room and the fewest tasks of the service
			// gets the task; ties by (hash of value, missing, value).
			var best *refBranch
			var bestTasks int
			for _, b := range branches {
				tasks, room := 0, false
				for _, n := range b.nodes {
					tasks += n.svc[g.Service]
					room = room || n.fits(g)
				}
				if room && (best == nil || tasks < bestTasks || tasks == bestTasks && refBranchLess(gs, b, best)) {
					best, bestTasks = b, tasks
				}
			}
			if best == nil {
				return got
			}
			cands = best.nodes
		}
		var pick *refNode
		for _, n := range cands {
			if n.fits(g) && (pick == nil || refNodeLess(g, gs, n, pick)) {
				pick = n
			}
		}
		if pick == nil {
			return got
		}
		pick.cpuRes += g.CPU
		pick.memRes += g.Mem
		pick.svc[g.Service]++
		pick.total++
		got[pick.ID]++
	}
	return got
}

func refBranchLess(gs uint64, a, b *refBranch) bool {
	key := func(x *refBranch) (uint64, int) {
		if x.missing {
			return mix.Mix64(gs ^ missingLabel), 1
		}
		return mix.Mix64(gs ^ hashString(x.value)), 0
	}
	ha, ma := key(a)
	hb, mb := key(b)
	if c := cmp.Or(cmp.Compare(ha, hb), cmp.Compare(ma, mb)); c != 0 {
		return c < 0
	}
	return a.value < b.value
}

// refNodeLess is the per-task node order: spread takes the fewest tasks of
// the service, then the fewest tasks in total; bin-pack takes the highest
// load; then the seeded hash of the node ID.
func refNodeLess(g Request, gs uint64, a, b *refNode) bool {
	var c int
	if g.Strategy == BinPack {
		la := max(share(a.cpuRes, a.CPU), share(a.memRes, a.Mem))
		lb := max(share(b.cpuRes, b.CPU), share(b.memRes, b.Mem))
		c = cmp.Compare(lb, la)
	} else {
		c = cmp.Or(cmp.Compare(a.svc[g.Service], b.svc[g.Service]), cmp.Compare(a.total, b.total))
	}
	c = cmp.Or(c, cmp.Compare(mix.Mix64(gs^uint64(a.ID)), mix.Mix64(gs^uint64(b.ID))), cmp.Compare(a.ID, b.ID))
	return c < 0
}
