package sched

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// cluster is a generated snapshot: nodes and the tasks already on them.
type cluster struct {
	nodes []Node
	tasks []Task
}

func genCluster(t *rapid.T) cluster { return genClusterN(t, 24, 40) }

func genClusterN(t *rapid.T, maxNodes, maxTasks int) cluster {
	n := int(rapid.Uint64().Draw(t, "nodes") % uint64(maxNodes+1))
	ids := rapid.SliceOfNDistinct(rapid.Uint32Range(1, 5000), n, n, rapid.ID[uint32]).Draw(t, "ids")
	var c cluster
	for _, id := range ids {
		n := Node{
			ID:           id,
			Hostname:     fmt.Sprintf("h%d", rapid.IntRange(0, 5).Draw(t, "host")),
			Role:         rapid.SampledFrom([]Role{RoleWorker, RoleWorker, RoleManager}).Draw(t, "role"),
			Status:       rapid.SampledFrom([]NodeStatus{StatusReady, StatusReady, StatusReady, StatusDown, StatusDisconnected}).Draw(t, "status"),
			Availability: rapid.SampledFrom([]Availability{AvailabilityActive, AvailabilityActive, AvailabilityActive, AvailabilityPause, AvailabilityDrain}).Draw(t, "avail"),
			CPU:          rapid.SampledFrom([]int64{0, 1000, 2000, 4000, 8000, 16000}).Draw(t, "cpu"),
			Mem:          rapid.SampledFrom([]int64{0, 1 << 30, 4 << 30, 16 << 30}).Draw(t, "mem"),
		}
		labels := map[string]string{}
		if z := rapid.SampledFrom([]string{"a", "b", "c", ""}).Draw(t, "zone"); z != "" {
			labels["zone"] = z
		}
		if d := rapid.SampledFrom([]string{"ssd", "hdd", ""}).Draw(t, "disk"); d != "" {
			labels["disk"] = d
		}
		if len(labels) > 0 {
			n.Labels = labels
		}
		c.nodes = append(c.nodes, n)
	}
	if len(ids) > 0 {
		for range rapid.IntRange(0, maxTasks).Draw(t, "tasks") {
			c.tasks = append(c.tasks, Task{
				Node:    rapid.SampledFrom(ids).Draw(t, "node"),
				Service: rapid.Uint32Range(1, 3).Draw(t, "service"),
				CPU:     rapid.SampledFrom([]int64{0, 100, 500}).Draw(t, "tcpu"),
				Mem:     rapid.SampledFrom([]int64{0, 256 << 20}).Draw(t, "tmem"),
			})
		}
	}
	return c
}

func genGroup(t *rapid.T, c cluster) Request { return genGroupN(t, c, 80) }

func genGroupN(t *rapid.T, c cluster, maxCount int) Request {
	pool := []string{"node.labels.zone==a", "node.labels.zone!=b", "node.labels.disk==ssd",
		"node.labels.disk!=hdd", "node.role==worker", "node.role!=manager", "node.hostname!=h1",
		"node.hostname==h2", "node.labels.rack==r1"}
	if len(c.nodes) > 0 {
		id := rapid.SampledFrom(c.nodes).Draw(t, "cnode").ID
		pool = append(pool, fmt.Sprintf("node.id!=%d", id), fmt.Sprintf("node.id == %d", id))
	}
	var cs []string
	for _, s := range pool {
		if rapid.IntRange(0, 9).Draw(t, "use "+s) == 0 {
			cs = append(cs, s)
		}
	}
	prefs := rapid.SampledFrom([][]string{nil, nil, {"node.labels.zone"}, {"node.labels.disk"},
		{"node.labels.zone", "node.labels.disk"}, {"node.labels.disk", "node.labels.zone"}}).Draw(t, "prefs")
	return Request{
		Service:     rapid.Uint32Range(1, 3).Draw(t, "gservice"),
		SpecVersion: rapid.Uint64Range(0, 3).Draw(t, "version"),
		Count:       int(rapid.Uint64().Draw(t, "count") % uint64(rapid.SampledFrom([]int{4, maxCount/8 + 1, maxCount/2 + 1, maxCount + 1}).Draw(t, "scale"))),
		MaxPerNode:  rapid.SampledFrom([]int{0, 0, 0, 1, 2, 3, 5}).Draw(t, "max"),
		CPU:         rapid.SampledFrom([]int64{0, 0, 100, 250, 1000}).Draw(t, "gcpu"),
		Mem:         rapid.SampledFrom([]int64{0, 0, 128 << 20, 512 << 20}).Draw(t, "gmem"),
		Constraints: MustParseConstraints(cs...),
		Preferences: prefs,
		Strategy:    rapid.SampledFrom([]Strategy{Spread, Spread, BinPack}).Draw(t, "strategy"),
	}
}

func mustTable(t interface{ Fatal(...any) }, c cluster) *Table {
	tb, err := NewTableFrom(c.nodes, c.tasks)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func asMap(p Placement) map[uint32]int {
	m := map[uint32]int{}
	for i, id := range p.Nodes {
		m[id] = int(p.Counts[i])
	}
	return m
}

// spreadRange returns max − min of the service's tasks over the filtered
// (ready, active, constraint-satisfying) nodes.
func spreadRange(ref *refCluster, g Request) int {
	lo, hi, any := 0, 0, false
	for _, n := range ref.nodes {
		if !n.filtered(g) {
			continue
		}
		s := n.svc[g.Service]
		if !any {
			lo, hi, any = s, s, true
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	return hi - lo
}

func TestPlaceMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { checkAgainstReference(t, genCluster(t), nil) })
}

// TestPlaceMatchesReferenceLarge runs the same properties on clusters big
// enough for the quickselect and counting-sort paths.
func TestPlaceMatchesReferenceLarge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genClusterN(t, 150, 300)
		checkAgainstReference(t, c, &c)
	})
}

// checkAgainstReference places a generated group on c and checks every
// property against the naive reference. With big set, the group is sized
// for it.
func checkAgainstReference(t *rapid.T, c cluster, big *cluster) {
	{
		g := genGroup(t, c)
		if big != nil {
			g = genGroupN(t, c, 600)
		}
		seed := rapid.Uint64().Draw(t, "seed")
		tb := mustTable(t, c)
		p, err := tb.Place(g, seed)
		got := asMap(p)
		ref := newRefCluster(c.nodes, c.tasks)
		want := ref.place(g, seed)

		// Safety: a node that got a task is ready, active and satisfies
		// every constraint.
		for id := range got {
			if r := tb.row[id]; tb.status[r] != StatusReady || tb.avail[r] != AvailabilityActive {
				t.Fatalf("node %d got tasks but is %s/%s", id, tb.status[r], tb.avail[r])
			}
			for _, cs := range g.Constraints {
				if !tb.matches(cs, tb.row[id]) {
					t.Fatalf("node %d got tasks but violates %s", id, cs)
				}
			}
		}
		// Safety: a node that got a task has its reservations within its
		// capacity and at most MaxPerNode tasks of the service.
		for id := range got {
			cpu, mem, _, _ := tb.Reserved(id)
			n, _ := tb.Node(id)
			if g.CPU > 0 && cpu > n.CPU || g.Mem > 0 && mem > n.Mem {
				t.Fatalf("node %d over-reserved: cpu %d/%d mem %d/%d", id, cpu, n.CPU, mem, n.Mem)
			}
			if s := tb.ServiceTasks(id, g.Service); g.MaxPerNode > 0 && int(s) > g.MaxPerNode {
				t.Fatalf("node %d runs %d tasks of service %d, max %d", id, s, g.Service, g.MaxPerNode)
			}
		}
		// It places exactly as many tasks as the reference.
		wantN := 0
		for _, k := range want {
			wantN += k
		}
		if p.Placed != wantN {
			t.Fatalf("placed %d, reference placed %d", p.Placed, wantN)
		}
		// Its spread is as even as the reference's: the same max − min of
		// the service's tasks over the filtered nodes.
		fast := newRefCluster(c.nodes, c.tasks)
		for _, n := range fast.nodes {
			n.svc[g.Service] += got[n.ID]
		}
		if g.Strategy == Spread && len(g.Preferences) == 0 && spreadRange(fast, g) != spreadRange(ref, g) {
			t.Fatalf("spread range %d, reference %d", spreadRange(fast, g), spreadRange(ref, g))
		}
		// Stronger: it puts the same number of tasks on every node as the
		// reference, preferences and bin-pack included.
		if !maps.Equal(got, want) {
			t.Fatalf("placement differs from reference:\n got %v\nwant %v", got, want)
		}
		// Eligible lists exactly the nodes that CheckNode accepts.
		elig, err2 := tb.Eligible(g, nil)
		if err2 != nil {
			t.Fatal(err2)
		}
		var accepted []uint32
		for _, id := range tb.NodeIDs() {
			if tb.CheckNode(g, id) == nil {
				accepted = append(accepted, id)
			}
		}
		if !slices.Equal(elig, accepted) {
			t.Fatalf("Eligible %v, CheckNode accepts %v", elig, accepted)
		}
		// It reports a shortfall exactly when it places fewer than asked,
		// and then counts every node under exactly one reason.
		var ue *UnplacedError
		if (p.Placed < g.Count) != errors.As(err, &ue) {
			t.Fatalf("placed %d of %d, err %v", p.Placed, g.Count, err)
		}
		if ue != nil {
			w := ue.Why
			sum := w.NotReady + w.Paused + w.Drained + w.CPU + w.Memory + w.MaxPerNode
			for _, cc := range w.Constraints {
				sum += cc.Excluded
			}
			if sum != len(c.nodes) {
				t.Fatalf("explanation counts %d nodes, cluster has %d: %v", sum, len(c.nodes), err)
			}
		}
	}
}

// op is one incremental table update in TestIncrementalMatchesSnapshot.
type op struct {
	kind int
	node Node
	task Task
}

func TestIncrementalMatchesSnapshot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		tb := mustTable(t, c)
		nodes := map[uint32]Node{}
		for _, n := range c.nodes {
			nodes[n.ID] = n
		}
		tasks := slices.Clone(c.tasks)
		extra := genCluster(t) // a pool of node descriptions to upsert
		for range int(rapid.Uint64().Draw(t, "ops") % 40) {
			ids := slices.Sorted(maps.Keys(nodes))
			switch k := rapid.IntRange(0, 5).Draw(t, "op"); {
			case k == 0 && len(extra.nodes) > 0:
				n := rapid.SampledFrom(extra.nodes).Draw(t, "upsert")
				if len(ids) > 0 && rapid.Bool().Draw(t, "replace") {
					n.ID = rapid.SampledFrom(ids).Draw(t, "id")
				}
				tb.UpsertNode(n)
				nodes[n.ID] = n
			case k == 1 && len(ids) > 0:
				id := rapid.SampledFrom(ids).Draw(t, "remove")
				if !tb.RemoveNode(id) {
					t.Fatalf("RemoveNode(%d) = false", id)
				}
				delete(nodes, id)
				tasks = slices.DeleteFunc(tasks, func(x Task) bool { return x.Node == id })
			case k == 2 && len(ids) > 0:
				id := rapid.SampledFrom(ids).Draw(t, "status")
				s := rapid.SampledFrom([]NodeStatus{StatusReady, StatusDown}).Draw(t, "s")
				_ = tb.SetStatus(id, s)
				n := nodes[id]
				n.Status = s
				nodes[id] = n
			case k == 3 && len(ids) > 0:
				id := rapid.SampledFrom(ids).Draw(t, "avail")
				a := rapid.SampledFrom([]Availability{AvailabilityActive, AvailabilityDrain}).Draw(t, "a")
				_ = tb.SetAvailability(id, a)
				n := nodes[id]
				n.Availability = a
				nodes[id] = n
			case k == 4 && len(ids) > 0:
				x := Task{Node: rapid.SampledFrom(ids).Draw(t, "tnode"), Service: rapid.Uint32Range(1, 3).Draw(t, "tsvc"), CPU: 100, Mem: 1 << 20}
				if err := tb.AddTask(x.Node, x.Service, x.CPU, x.Mem); err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, x)
			case k == 5 && len(tasks) > 0:
				i := rapid.IntRange(0, len(tasks)-1).Draw(t, "task")
				x := tasks[i]
				if err := tb.RemoveTask(x.Node, x.Service, x.CPU, x.Mem); err != nil {
					t.Fatal(err)
				}
				tasks = slices.Delete(tasks, i, i+1)
			}
		}
		snap := cluster{tasks: tasks}
		for _, id := range slices.Sorted(maps.Keys(nodes)) {
			snap.nodes = append(snap.nodes, nodes[id])
		}
		// Replay in reverse order so rows land in different places.
		slices.Reverse(snap.nodes)
		rebuilt := mustTable(t, snap)
		g := genGroup(t, snap)
		seed := rapid.Uint64().Draw(t, "seed")
		p1, err1 := tb.Place(g, seed)
		p1 = p1.Clone()
		p2, err2 := rebuilt.Place(g, seed)

		// An incrementally updated table places a group exactly as a table
		// rebuilt from the same snapshot (in another row order) does.
		if p1.Placed != p2.Placed || !slices.Equal(p1.Nodes, p2.Nodes) || !slices.Equal(p1.Counts, p2.Counts) {
			t.Fatalf("incremental %+v, rebuilt %+v", p1, p2)
		}
		if fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("incremental err %v, rebuilt err %v", err1, err2)
		}
		// And it still agrees with the reference.
		if want := newRefCluster(snap.nodes, snap.tasks).place(g, seed); !maps.Equal(asMap(p2), want) {
			t.Fatalf("rebuilt %v, reference %v", asMap(p2), want)
		}
	})
}
