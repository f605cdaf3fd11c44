package sched

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// node returns a ready, active node with room for plenty of tasks and the
// given "key=value" labels.
func node(id uint32, labels ...string) Node {
	n := Node{ID: id, Status: StatusReady, CPU: 100_000, Mem: 1 << 40}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
	return n
}

func withCPU(n Node, cpu int64) Node { n.CPU = cpu; return n }

func TestPreferences(t *testing.T) {
	zone := []string{"node.labels.zone"}
	tests := []struct {
		name  string
		nodes []Node
		tasks []Task
		g     Request
		want  map[uint32]int // tasks per node; nil: check branches only
		// branches: node sets whose summed counts must equal the value
		branches map[string]int
	}{{
		name:     "split evenly across values; nodes without the label form their own branch",
		nodes:    []Node{node(1, "zone=a"), node(2, "zone=a"), node(3, "zone=b"), node(4)},
		g:        Request{Service: 1, Count: 9, Preferences: zone},
		branches: map[string]int{"1,2": 3, "3": 3, "4": 3},
	}, {
		name:  "existing tasks of the service count toward their branch",
		nodes: []Node{node(1, "zone=a"), node(2, "zone=a"), node(3, "zone=b")},
		tasks: []Task{{Node: 1, Service: 1}, {Node: 1, Service: 1}, {Node: 1, Service: 1}, {Node: 1, Service: 1}},
		g:     Request{Service: 1, Count: 8, Preferences: zone},
		want:  map[uint32]int{2: 2, 3: 6},
	}, {
		name:  "a full branch hands its share to the others",
		nodes: []Node{withCPU(node(1, "zone=a"), 1000), node(2, "zone=b"), node(3, "zone=c")},
		g:     Request{Service: 1, Count: 9, CPU: 1000, Preferences: zone},
		want:  map[uint32]int{1: 1, 2: 4, 3: 4},
	}, {
		name: "nested preferences split each branch again",
		nodes: []Node{node(1, "zone=a", "rack=r1"), node(2, "zone=a", "rack=r2"),
			node(3, "zone=a", "rack=r2"), node(4, "zone=b", "rack=r1")},
		g:    Request{Service: 1, Count: 8, Preferences: []string{"node.labels.zone", "node.labels.rack"}},
		want: map[uint32]int{1: 2, 2: 1, 3: 1, 4: 4},
	}, {
		name:  "a branch with no eligible node is skipped",
		nodes: []Node{node(1, "zone=a"), node(2, "zone=b"), {ID: 3, Status: StatusReady, Availability: AvailabilityDrain, CPU: 1, Mem: 1, Labels: map[string]string{"zone": "c"}}},
		g:     Request{Service: 1, Count: 4, Preferences: zone},
		want:  map[uint32]int{1: 2, 2: 2},
	}, {
		name:  "constraints apply before the split",
		nodes: []Node{node(1, "zone=a", "disk=ssd"), node(2, "zone=a"), node(3, "zone=b", "disk=ssd")},
		g:     Request{Service: 1, Count: 6, Preferences: zone, Constraints: MustParseConstraints("node.labels.disk==ssd")},
		want:  map[uint32]int{1: 3, 3: 3},
	}, {
		name:  "bin-pack inside each branch",
		nodes: []Node{node(1, "zone=a"), node(2, "zone=a"), node(3, "zone=b")},
		tasks: []Task{{Node: 2, Service: 9, CPU: 50_000}},
		g:     Request{Service: 1, Count: 4, Preferences: zone, Strategy: BinPack},
		want:  map[uint32]int{2: 2, 3: 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := NewTableFrom(tc.nodes, tc.tasks)
			if err != nil {
				t.Fatal(err)
			}
			p, err := tb.Place(tc.g, 42)
			if err != nil {
				t.Fatal(err)
			}
			got := asMap(p)
			if tc.want != nil && !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for set, want := range tc.branches {
				sum := 0
				for _, id := range strings.Split(set, ",") {
					for n, c := range got {
						if id == itoa(n) {
							sum += c
						}
					}
				}
				if sum != want {
					t.Errorf("branch {%s} got %d tasks, want %d (placement %v)", set, sum, want, got)
				}
			}
		})
	}
}

func itoa(n uint32) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

func TestRemainderFollowsSeed(t *testing.T) {
	nodes := []Node{node(1, "zone=a"), node(2, "zone=b"), node(3, "zone=c")}
	g := Request{Service: 7, Count: 4, Preferences: []string{"node.labels.zone"}}
	outcomes := map[uint32]bool{}
	for seed := range uint64(30) {
		a, _ := NewTableFrom(nodes, nil)
		b, _ := NewTableFrom([]Node{nodes[2], nodes[0], nodes[1]}, nil)
		pa, _ := a.Place(g, seed)
		pb, _ := b.Place(g, seed)
		ma, mb := asMap(pa), asMap(pb)
		if !maps.Equal(ma, mb) {
			t.Fatalf("seed %d: row order changed the placement: %v vs %v", seed, ma, mb)
		}
		for id, c := range ma {
			if c == 2 {
				outcomes[id] = true
			}
		}
	}
	if len(outcomes) < 2 {
		t.Errorf("the extra task always went to the same branch %v over 30 seeds", outcomes)
	}
}

func TestDrainPauseDown(t *testing.T) {
	pause, drain, down := node(2), node(3), node(4)
	pause.Availability, drain.Availability, down.Status = AvailabilityPause, AvailabilityDrain, StatusDown
	tb, _ := NewTableFrom([]Node{node(1), pause, drain, down}, nil)
	g := Request{Service: 1, Count: 5, MaxPerNode: 2}
	p, err := tb.Place(g, 1)
	if got := asMap(p); !maps.Equal(got, map[uint32]int{1: 2}) {
		t.Errorf("placement %v, want only node 1 (max 2)", got)
	}
	want := "no suitable node for 3 of 5 tasks of service 1 (1 node not ready, 1 node paused, " +
		"1 node drained, max 2 replicas per node reached on 1 node)"
	if err == nil || err.Error() != want || !errors.Is(err, ErrNoSuitableNode) {
		t.Errorf("err = %v\nwant %s", err, want)
	}

	// Draining node 1 leaves nothing; making node 3 active again lets it
	// take the next group.
	if err := tb.SetAvailability(1, AvailabilityDrain); err != nil {
		t.Fatal(err)
	}
	if p, _ := tb.Place(Request{Service: 2, Count: 1}, 1); p.Placed != 0 {
		t.Errorf("placed %d on a cluster with no active node", p.Placed)
	}
	_ = tb.SetAvailability(3, AvailabilityActive)
	_ = tb.SetStatus(4, StatusReady)
	if p, _ := tb.Place(Request{Service: 2, Count: 2, MaxPerNode: 1}, 1); !maps.Equal(asMap(p), map[uint32]int{3: 1, 4: 1}) {
		t.Errorf("after reactivation got %v, want nodes 3 and 4", asMap(p))
	}
	if err := tb.SetStatus(99, StatusReady); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("SetStatus(unknown) = %v", err)
	}
}

func TestBinPack(t *testing.T) {
	tb, _ := NewTableFrom(
		[]Node{withCPU(node(1), 4000), withCPU(node(2), 4000), withCPU(node(3), 4000)},
		[]Task{{Node: 1, Service: 9, CPU: 3000}, {Node: 2, Service: 9, CPU: 1000}})
	p, err := tb.Place(Request{Service: 1, Count: 5, CPU: 500, Strategy: BinPack}, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Node 1 (75% used) fills first, then node 2 (25%); node 3 stays empty.
	if got := asMap(p); !maps.Equal(got, map[uint32]int{1: 2, 2: 3}) {
		t.Errorf("got %v, want map[1:2 2:3]", got)
	}
	if cpu, _, tasks, _ := tb.Reserved(1); cpu != 4000 || tasks != 3 {
		t.Errorf("node 1 reserved %d CPU over %d tasks, want 4000 over 3", cpu, tasks)
	}
}

func TestSpreadOrder(t *testing.T) {
	// Node 1 runs one task of the service and one other, node 2 two
	// others, node 3 nothing. SwarmKit's order (fewest of the service,
	// then fewest in total) gives node 3, node 2, node 3, node 1.
	nodes := []Node{node(1), node(2), node(3)}
	tasks := []Task{{Node: 1, Service: 1}, {Node: 1, Service: 3}, {Node: 2, Service: 2}, {Node: 2, Service: 2}}
	for count, want := range []map[uint32]int{{}, {3: 1}, {2: 1, 3: 1}, {2: 1, 3: 2}, {1: 1, 2: 1, 3: 2}} {
		tb, _ := NewTableFrom(nodes, tasks)
		p, _ := tb.Place(Request{Service: 1, Count: count}, 5)
		if got := asMap(p); !maps.Equal(got, want) {
			t.Errorf("count %d: got %v, want %v", count, got, want)
		}
	}
}

func TestExplanation(t *testing.T) {
	var nodes []Node
	for i := range uint32(10) {
		n := node(i+1, "zone=a")
		if i < 3 {
			n = node(i+1, "zone=b")
			n.Mem = 1 << 30
		}
		nodes = append(nodes, n)
	}
	tb, _ := NewTableFrom(nodes, []Task{{Node: 1, Service: 5, Mem: 1 << 29}})
	g := Request{Service: 3, Count: 5, Mem: 2 << 30, Constraints: MustParseConstraints("node.labels.zone==b")}
	p, err := tb.Place(g, 9)
	want := "no suitable node for 5 of 5 tasks of service 3 " +
		"(constraint node.labels.zone==b excluded 7 nodes, insufficient memory on 3 nodes (a task reserves 2 GiB))"
	if p.Placed != 0 || err == nil || err.Error() != want {
		t.Fatalf("placed %d, err %v\nwant %s", p.Placed, err, want)
	}
	var ue *UnplacedError
	if !errors.As(err, &ue) || ue.Why.Memory != 3 || ue.Why.Constraints[0].Excluded != 7 {
		t.Errorf("explanation %+v", ue)
	}
	for n, want := range map[int64]string{100: "100 bytes", 1 << 29: "512 MiB", 3 << 29: "1.5 GiB", 1<<40 + 1: "1 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int]string{1: "constraint node.labels.zone==c does not match the only node",
		3: "constraint node.labels.zone==c matches none of the 3 nodes"} {
		tb, _ := NewTableFrom(nodes[:n], nil)
		_, err := tb.Place(Request{Service: 3, Count: 1, Constraints: MustParseConstraints("node.labels.zone==c")}, 9)
		if !errors.As(err, &ue) || ue.Why.String() != want {
			t.Errorf("%d nodes: %v, want %q", n, err, want)
		}
	}
	if _, err := NewTable().Place(g, 0); err == nil || !strings.HasSuffix(err.Error(), "(no nodes in the cluster)") {
		t.Errorf("empty table: %v", err)
	}
}

func TestCheckNode(t *testing.T) {
	down := node(2)
	down.Status = StatusDown
	drain := node(3)
	drain.Availability = AvailabilityDrain
	tb, _ := NewTableFrom([]Node{withCPU(node(1, "zone=a"), 1000), down, drain, node(4)},
		[]Task{{Node: 4, Service: 1}})
	g := func(cpu int64, cs ...string) Request {
		return Request{Service: 1, Count: 1, CPU: cpu, MaxPerNode: 1, Constraints: MustParseConstraints(cs...)}
	}
	tests := []struct {
		g    Request
		node uint32
		want string // "" = fits
	}{
		{g(500), 1, ""},
		{g(2000), 1, "node 1 cannot run a task of service 1: insufficient CPU (task needs 2000 milli-cores, node has 1000 free of 1000)"},
		{g(0, "node.labels.zone==b"), 1, `node 1 cannot run a task of service 1: constraint not satisfied (constraint node.labels.zone==b not satisfied: node.labels.zone is "a")`},
		{g(0, "node.labels.disk==ssd"), 1, `node 1 cannot run a task of service 1: constraint not satisfied (constraint node.labels.disk==ssd not satisfied: node has no label "disk")`},
		{g(0), 2, "node 2 cannot run a task of service 1: not ready (node is down)"},
		{g(0), 3, "node 3 cannot run a task of service 1: drained (node availability is drain)"},
		{g(0), 4, "node 4 cannot run a task of service 1: max replicas per node reached (node runs 1 tasks of the service, max 1)"},
		{g(0), 5, "unknown node 5"},
	}
	for _, tc := range tests {
		err := tb.CheckNode(tc.g, tc.node)
		if got := errString(err); got != tc.want {
			t.Errorf("CheckNode(%v, %d)\n got %s\nwant %s", tc.g.Constraints, tc.node, got, tc.want)
		}
		if tc.want != "" && tc.node != 5 && !errors.Is(err, ErrNodeUnsuitable) {
			t.Errorf("%v is not ErrNodeUnsuitable", err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParseConstraint(t *testing.T) {
	ok := []struct {
		in   string
		want Constraint
	}{
		{"node.id==7", Constraint{Field: FieldID, Op: OpEq, Value: "7", ID: 7}},
		{"node.hostname != web-1", Constraint{Field: FieldHostname, Op: OpNe, Value: "web-1"}},
		{"node.role==manager", Constraint{Field: FieldRole, Op: OpEq, Value: "manager", Role: RoleManager}},
		{" node.labels.zone == eu-1 ", Constraint{Field: FieldLabel, Key: "zone", Op: OpEq, Value: "eu-1"}},
		{"node.labels.a.b!=c", Constraint{Field: FieldLabel, Key: "a.b", Op: OpNe, Value: "c"}},
	}
	for _, tc := range ok {
		c, err := ParseConstraint(tc.in)
		if err != nil || c != tc.want {
			t.Errorf("ParseConstraint(%q) = %+v, %v; want %+v", tc.in, c, err, tc.want)
		}
		if again, err := ParseConstraint(c.String()); err != nil || again != c {
			t.Errorf("%q does not round-trip through String: %q", tc.in, c.String())
		}
	}
	bad := []struct{ in, want string }{
		{"node.labels.zone", `invalid constraint "node.labels.zone": no operator; want <field>==<value> or <field>!=<value>`},
		{"node.labels.zone=a", `invalid constraint "node.labels.zone=a": use == or != to compare, not a single =`},
		{"==a", `invalid constraint "==a": missing field before ==`},
		{"node.role!=", `invalid constraint "node.role!=": missing value after !=`},
		{"node.role==boss", `invalid constraint "node.role==boss": node.role must be manager or worker, got "boss"`},
		{"node.id==abc", `invalid constraint "node.id==abc": node.id must be a node number, got "abc"`},
		{"node.labels.==x", `invalid constraint "node.labels.==x": missing label key after node.labels.`},
		{"node.ip==1.2.3.4", `invalid constraint "node.ip==1.2.3.4": unknown field "node.ip"; want node.id, node.hostname, node.role or node.labels.<key>`},
		{"node.labels.a==b==c", `invalid constraint "node.labels.a==b==c": value "b==c" contains an operator; use one == or != per constraint`},
		{"node. labels.a==b", `invalid constraint "node. labels.a==b": field "node. labels.a" contains a space`},
	}
	for _, tc := range bad {
		_, err := ParseConstraint(tc.in)
		if errString(err) != tc.want || !errors.Is(err, ErrInvalidConstraint) {
			t.Errorf("ParseConstraint(%q)\n got %v\nwant %s", tc.in, err, tc.want)
		}
	}
}

func TestInvalidGroup(t *testing.T) {
	tb, _ := NewTableFrom([]Node{node(1)}, nil)
	for _, g := range []Request{{Count: -1}, {Count: 1, CPU: -1}, {Count: 1, Mem: -1}, {Count: 1, MaxPerNode: -1}, {Count: 1, Strategy: 9}} {
		if _, err := tb.Place(g, 0); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Place(%+v) = %v, want ErrInvalidRequest", g, err)
		}
	}
	_, err := tb.Place(Request{Count: 1, Preferences: []string{"node.hostname"}}, 0)
	if want := `invalid preference "node.hostname": want node.labels.<key>`; errString(err) != want {
		t.Errorf("bad preference: %v", err)
	}
}

func TestTableUpdates(t *testing.T) {
	tb := NewTable()
	tb.UpsertNode(node(1, "zone=a"))
	tb.UpsertNode(node(2, "zone=a"))
	onA := Request{Service: 1, Count: 2, MaxPerNode: 1, Constraints: MustParseConstraints("node.labels.zone==a")}

	// Relabelling node 2 moves it out of zone a; its tasks stay.
	if err := tb.AddTask(2, 1, 10, 20); err != nil {
		t.Fatal(err)
	}
	tb.UpsertNode(node(2, "zone=b"))
	if cpu, mem, n, _ := tb.Reserved(2); cpu != 10 || mem != 20 || n != 1 {
		t.Errorf("upsert lost reservations: %d %d %d", cpu, mem, n)
	}
	if p, _ := tb.Place(onA, 0); !maps.Equal(asMap(p), map[uint32]int{1: 1}) {
		t.Errorf("after relabel got %v, want only node 1", asMap(p))
	}

	// A removed node's row is reused clean by the next node.
	if !tb.RemoveNode(1) || tb.RemoveNode(1) {
		t.Fatal("RemoveNode")
	}
	tb.UpsertNode(node(3, "zone=a"))
	if n := tb.ServiceTasks(3, 1); n != 0 {
		t.Errorf("new node inherited %d tasks", n)
	}
	if p, _ := tb.Place(onA, 0); !maps.Equal(asMap(p), map[uint32]int{3: 1}) {
		t.Errorf("after remove got %v, want only node 3", asMap(p))
	}
	if tb.Len() != 2 {
		t.Errorf("Len = %d", tb.Len())
	}

	if err := tb.RemoveTask(3, 2, 0, 0); !errors.Is(err, ErrNoSuchTask) {
		t.Errorf("RemoveTask of a missing task = %v", err)
	}
	if err := tb.AddTask(1, 1, 0, 0); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("AddTask on a removed node = %v", err)
	}
	if _, err := NewTableFrom(nil, []Task{{Node: 4}}); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("NewTableFrom with a task on an unknown node = %v", err)
	}
}

func TestPlacementAssignments(t *testing.T) {
	tb, _ := NewTableFrom([]Node{node(5), node(2)}, nil)
	p, _ := tb.Place(Request{Service: 1, Count: 3}, 0)
	keep := p.Clone()
	got := p.Assignments(nil)
	if len(got) != 3 || got[0] != keep.Nodes[0] || keep.Nodes[0] != 2 || keep.Nodes[1] != 5 {
		t.Errorf("assignments %v from %+v", got, keep)
	}
	tb.Place(Request{Service: 2, Count: 1}, 0)
	if keep.Nodes[0] != 2 || keep.Counts[0]+keep.Counts[1] != 3 {
		t.Errorf("Clone shares memory with the table: %+v", keep)
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{StatusReady.String(), "ready"}, {StatusDown.String(), "down"}, {NodeStatus(9).String(), "NodeStatus(9)"},
		{AvailabilityPause.String(), "pause"}, {Availability(7).String(), "Availability(7)"},
		{RoleManager.String(), "manager"}, {Role(3).String(), "Role(3)"},
		{BinPack.String(), "binpack"}, {Spread.String(), "spread"}, {Strategy(4).String(), "Strategy(4)"},
		{ReasonMemory.String(), "insufficient memory"}, {Reason(99).String(), "Reason(99)"},
		{FieldLabel.String(), "node.labels"}, {OpNe.String(), "!="},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestConstraintMatchNode(t *testing.T) {
	labels := map[string]string{"zone": "a"}
	for _, tc := range []struct {
		c    string
		want bool
	}{
		{"node.labels.zone==a", true}, {"node.labels.zone!=a", false},
		{"node.labels.disk==ssd", false}, {"node.labels.disk!=ssd", true},
		{"node.hostname==h1", true}, {"node.role==manager", false}, {"node.role!=manager", true},
		{"node.id==7", true}, {"node.id!=7", false},
	} {
		c, err := ParseConstraint(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.MatchNode(7, "h1", "worker", labels); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.c, got, tc.want)
		}
	}
}
