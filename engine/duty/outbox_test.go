package duty

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"shoal/route"
	"shoal/statemachine"
)

// redriveOnce is one re-drive period: one run of the cluster group
// leader's outbox duty. A fresh duty each time, as after a leader change:
// it knows only what the replicated states say.
func redriveOnce(t testing.TB, m *Memory) {
	t.Helper()
	if err := NewOutboxDuty(m, OutboxConfig{}).RunOnce(context.Background()); err != nil {
		t.Fatalf("outbox duty: %v", err)
	}
}

func submitAll(t testing.TB, m *Memory, cmds ...statemachine.Command) {
	t.Helper()
	for i, o := range m.SubmitMany(context.Background(), cmds) {
		if err := o.Err(); err != nil {
			t.Fatalf("%s: %v", cmds[i].Kind, err)
		}
	}
}

// view is what a group says about node 1 and network "net".
func view(m *Memory, g int) string {
	var out string
	_ = m.ReadLocal(g, func(s *statemachine.State) {
		if n := s.Node(1); n != nil {
			out = fmt.Sprintf("node 1 %s %s", n.Status, n.Availability)
		} else {
			out = "no node 1"
		}
		if nw := s.NetworkByName("net"); nw != nil {
			out += " net " + nw.Subnet
		} else {
			out += " no net"
		}
	})
	return out
}

func disagreement(m *Memory) string {
	want := view(m, route.ClusterGroup)
	for g := 1; g <= m.Groups(); g++ {
		if got := view(m, g); got != want {
			return fmt.Sprintf("group %d has %q, the cluster group %q", g, got, want)
		}
	}
	return ""
}

// A crash between the cluster group and a service group (the submitter
// died after the cluster group applied a node or network change, before
// group 2 did) leaves the groups disagreeing only until the next re-drive
// period: one run of the leader's duty, even a new leader's, brings every
// group to the cluster group's view.
func TestCrashBetweenGroupsHealsInOneRedrive(t *testing.T) {
	m := newMem(t, 2, nil)
	submitAll(t, m, statemachine.Command{Kind: statemachine.CmdUpsertNode,
		NodeSpec: &statemachine.Node{ID: 1, Name: "n1", Status: statemachine.NodeReady}})
	crashes := []statemachine.Command{
		{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeDown},
		{Kind: statemachine.CmdSetAvailability, Node: 1, Availability: statemachine.AvailDrain},
		{Kind: statemachine.CmdCreateNetwork, NetworkSpec: &statemachine.Network{ID: 1, Name: "net", Subnet: "10.9.0.0/24"}},
	}
	for _, cmd := range crashes {
		m.DropApply(func(g int, _ statemachine.Command) bool { return g == 2 })
		m.SubmitMany(context.Background(), []statemachine.Command{cmd}) // group 2's part is lost
		m.DropApply(nil)
		if disagreement(m) == "" {
			t.Fatalf("%s: the injected crash left the groups agreeing; it injected nothing", cmd.Kind)
		}
		redriveOnce(t, m)
		if d := disagreement(m); d != "" {
			t.Fatalf("after %s and one re-drive: %s", cmd.Kind, d)
		}
	}
}

// The outbox keeps an entry until every group applied it, and drops it
// then; a replayed delivery changes nothing.
func TestOutboxTrimmedOnceEveryGroupApplied(t *testing.T) {
	m := newMem(t, 3, nil)
	m.DropApply(func(g int, _ statemachine.Command) bool { return g == 3 })
	submitAll(t, m, statemachine.Command{Kind: statemachine.CmdUpsertNode,
		NodeSpec: &statemachine.Node{ID: 1, Name: "n1", Status: statemachine.NodeReady}})
	entries := func() []statemachine.OutboxEntry {
		var es []statemachine.OutboxEntry
		_ = m.ReadLocal(0, func(s *statemachine.State) { es = s.Outbox(0) })
		return es
	}
	applied := m.Index(0)
	_ = NewOutboxDuty(m, OutboxConfig{}).RunOnce(context.Background()) // group 3 still unreachable
	if es := entries(); len(es) != 1 || es[0].Seq != 1 || es[0].Index != applied {
		t.Fatalf("outbox %+v, want entry 1 kept for group 3, at the cluster group's index %d", es, applied)
	}
	if acked := m.State(0).OutboxAcked(1); acked != 1 {
		t.Fatalf("the cluster group knows group 1 applied up to %d, want 1", acked)
	}
	m.DropApply(nil)
	redriveOnce(t, m)
	if es := entries(); len(es) != 0 {
		t.Fatalf("outbox %+v after every group applied it, want empty", es)
	}
	e := statemachine.OutboxEntry{Seq: 1, Cmd: statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeDown}}
	out := m.Apply(1, statemachine.Command{Kind: statemachine.CmdDeliver, Group: 1, Entry: &e})
	if out.Results[0].Code != statemachine.CodeOK || m.State(1).Node(1).Status != statemachine.NodeReady {
		t.Fatalf("a replayed delivery was applied: %+v", out.Results[0])
	}
}

// leaseWorld is a cluster of 8 groups with a /26 and services whose names
// hash to different groups.
func leaseWorld(t *testing.T) *Memory {
	m := newMem(t, 8, nil)
	submitAll(t, m, statemachine.Command{Kind: statemachine.CmdCreateNetwork,
		NetworkSpec: &statemachine.Network{ID: 1, Name: "net", Subnet: "10.7.0.0/26"}})
	for _, name := range []string{"web", "db", "cache", "worker"} {
		submitAll(t, m, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: name, Replicas: 1, Networks: []string{"net"}}})
	}
	return m
}

func scale(_ testing.TB, m *Memory, name string, n uint32) {
	g := route.ServiceGroup(name, m.Groups())
	var spec statemachine.ServiceSpec
	_ = m.ReadLocal(g, func(s *statemachine.State) { spec = s.ServiceByName(name).Spec })
	spec.Replicas = n
	m.SubmitMany(context.Background(), []statemachine.Command{{Kind: statemachine.CmdUpdateService, Spec: &spec}}) // lost in a crash: the test sees it
}

// addressed counts a service's tasks that hold an address and collects
// the messages of those that wait for one.
func addressed(m *Memory, name string) (n int, waiting []string) {
	_ = m.ReadLocal(route.ServiceGroup(name, m.Groups()), func(s *statemachine.State) {
		svc := s.ServiceByName(name)
		for _, id := range s.TaskIDs() {
			tk := s.Task(id)
			if tk.Service != svc.ID || tk.Desired.Stopping() {
				continue
			}
			if len(tk.Attachments) > 0 {
				n++
			} else {
				waiting = append(waiting, tk.Message())
			}
		}
	})
	return n, waiting
}

// A service gets addresses from the whole network, whichever group it
// hashes to: web (group 5 of 8) holds far more than 1/8 of a /26, the
// message says "full" only once every address is taken, and blocks a
// scale-down empties go back and serve a service of another group.
func TestLeasesFollowDemand(t *testing.T) {
	m := leaseWorld(t)
	redriveOnce(t, m)
	checkAddressesAcrossGroups(t, m)
	// 61 usable: 4 VIPs and 3 other tasks leave 54 for web.
	scale(t, m, "web", 40)
	redriveOnce(t, m)
	if n, w := addressed(m, "web"); n != 40 {
		t.Fatalf("web holds %d addresses of a /26 shared by 8 groups, want 40 (1/8 is 8); waiting: %q", n, w)
	}
	checkAddressesAcrossGroups(t, m)
	scale(t, m, "web", 70)
	redriveOnce(t, m)
	n, w := addressed(m, "web")
	if n != 54 || len(w) != 16 {
		t.Fatalf("web holds %d with %d waiting, want 54 (every free address) and 16 waiting", n, len(w))
	}
	for _, msg := range w {
		if !strings.Contains(msg, `network "net" is full`) {
			t.Fatalf("a task waiting on a full network says %q", msg)
		}
	}
	checkAddressesAcrossGroups(t, m)
	// Scaling web down frees addresses no node ever saw at once; their
	// blocks go back to the cluster group and serve db (group 3).
	scale(t, m, "web", 4)
	redriveOnce(t, m)
	scale(t, m, "db", 45)
	redriveOnce(t, m)
	if n, w := addressed(m, "db"); n != 45 {
		t.Fatalf("db holds %d addresses after web gave back 50, want 45; waiting: %q", n, w)
	}
	checkAddressesAcrossGroups(t, m)
}

// checkAddressesAcrossGroups checks invariant 6 across groups: every
// address a task or VIP may still hold lies in a block the cluster group
// leases to that task's group, so no address is held in two groups; and
// every group's own invariants.
func checkAddressesAcrossGroups(t testing.TB, m *Memory) {
	t.Helper()
	if err := crossGroupViolation(m); err != "" {
		t.Fatal(err)
	}
}

func crossGroupViolation(m *Memory) string {
	type key struct {
		nw   statemachine.NetworkID
		addr uint32
	}
	holder := map[key]int{}
	owners := map[statemachine.NetworkID]func(netip.Addr) uint32{}
	cluster := m.State(route.ClusterGroup)
	for _, id := range cluster.NetworkIDs() {
		p := cluster.Pool(id)
		owners[id] = func(a netip.Addr) uint32 {
			b, err := p.BlockOf(a)
			if err != nil {
				return 0
			}
			o, _ := p.BlockOwner(b)
			return o
		}
	}
	for g := 1; g <= m.Groups(); g++ {
		s := m.State(g)
		if err := s.CheckInvariants(); err != nil {
			return fmt.Sprintf("group %d: %v", g, err)
		}
		for _, id := range s.TaskIDs() {
			for _, at := range s.Task(id).Attachments {
				if at.Released {
					continue
				}
				a := netip.AddrFrom4([4]byte{byte(at.Addr >> 24), byte(at.Addr >> 16), byte(at.Addr >> 8), byte(at.Addr)})
				k := key{at.Network, at.Addr}
				if other, dup := holder[k]; dup {
					return fmt.Sprintf("inv6: %s held by a task of group %d and one of group %d", a, other, g)
				}
				holder[k] = g
				if own := owners[at.Network]; own == nil || own(a) != uint32(g) {
					return fmt.Sprintf("inv6: task %d of group %d holds %s in a block the cluster group does not lease to it", id, g, a)
				}
			}
		}
		for _, id := range s.NetworkIDs() {
			p := s.Pool(id)
			for _, sid := range s.ServiceIDs() {
				for _, a := range p.VIPs(uint64(sid)) {
					k := key{id, addrBits(a)}
					if other, dup := holder[k]; dup {
						return fmt.Sprintf("inv6: VIP %s of group %d also held in group %d", a, g, other)
					}
					holder[k] = g
					if own := owners[id]; own == nil || own(a) != uint32(g) {
						return fmt.Sprintf("inv6: VIP %s of group %d in a block the cluster group does not lease to it", a, g)
					}
				}
			}
		}
	}
	return ""
}

func addrBits(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
