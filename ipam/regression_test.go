package ipam

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// The SwarmKit regression (moby/swarmkit#2407): a task was deleted from the
// store, and its address freed, before its container stopped; a new task got
// the address while the old container still held it. This simulation runs
// tasks through create, assign, remove and restart on a small subnet, with
// agents that apply assignment changes late, stop containers slowly and send
// sync reports that arrive late and out of order, nodes that crash, and a
// save/load of the pool between rounds. Every container's address must stay
// held or quarantined by that container's task.

type simTask struct {
	addr  netip.Addr
	owner uint32
	node  uint32 // 0: never assigned
}

type simChange struct {
	seq  uint64
	task uint64
	addr netip.Addr
	add  bool
}

type simReport struct {
	seq  uint64
	held map[uint64]bool
}

type simNode struct {
	seq        uint64      // assignment set sequence number
	changes    []simChange // not yet applied by the agent
	applied    uint64      // the agent's applied sequence number
	containers map[uint64]netip.Addr
	stopping   map[uint64]bool
	reports    []simReport // collected, not yet delivered
}

type sim struct {
	r     *rand.Rand
	p     *Pool
	tasks map[uint64]*simTask
	nodes []*simNode // index = node ID - 1
	next  uint64
	// freeOnRemove reproduces SwarmKit's bug: removing an assigned task
	// frees its address at once instead of quarantining it.
	freeOnRemove bool
}

func newSim(seed uint64, freeOnRemove bool) (*sim, error) {
	p, err := New(Config{Name: "regress", Subnet: netip.MustParsePrefix("10.9.0.0/24"), BlockSize: 16})
	if err != nil {
		return nil, err
	}
	s := &sim{r: rand.New(rand.NewPCG(seed, 2407)), p: p, tasks: map[uint64]*simTask{}, freeOnRemove: freeOnRemove}
	for range 4 {
		s.nodes = append(s.nodes, &simNode{containers: map[uint64]netip.Addr{}, stopping: map[uint64]bool{}})
	}
	return s, nil
}

func (s *sim) liveTasks(pred func(*simTask) bool) []uint64 {
	var out []uint64
	for id, t := range s.tasks {
		if pred(t) {
			out = append(out, id)
		}
	}
	slices.Sort(out) // map order must not make the run irreproducible
	return out
}

func (s *sim) pick(ids []uint64) (uint64, bool) {
	if len(ids) == 0 {
		return 0, false
	}
	return ids[s.r.IntN(len(ids))], true
}

func (s *sim) create() error {
	s.next++
	owner := uint32(1 + s.r.IntN(3))
	a, err := s.p.Allocate(owner, s.next)
	if errors.Is(err, ErrExhausted) {
		if _, lerr := s.p.LeaseBlock(owner); lerr == nil {
			a, err = s.p.Allocate(owner, s.next)
		}
	}
	if errors.Is(err, ErrExhausted) {
		return nil // full: the orchestrator retries later
	}
	if err != nil {
		return err
	}
	s.tasks[s.next] = &simTask{addr: a, owner: owner}
	return nil
}

func (s *sim) remove(id uint64) error {
	t := s.tasks[id]
	delete(s.tasks, id) // the sim forgets it; the pool and the agent must not
	if t.node == 0 {
		return s.p.FreeUnassigned(t.addr, id)
	}
	n := s.nodes[t.node-1]
	n.seq++
	n.changes = append(n.changes, simChange{seq: n.seq, task: id, addr: t.addr})
	if s.freeOnRemove {
		return s.p.FreeUnassigned(t.addr, id)
	}
	return s.p.Release(t.addr, id, t.node, n.seq)
}

func (s *sim) step() error {
	switch x := s.r.IntN(100); {
	case x < 25:
		return s.create()
	case x < 40: // schedule a pending task
		if id, ok := s.pick(s.liveTasks(func(t *simTask) bool { return t.node == 0 })); ok {
			node := uint32(1 + s.r.IntN(len(s.nodes)))
			s.tasks[id].node = node
			n := s.nodes[node-1]
			n.seq++
			n.changes = append(n.changes, simChange{seq: n.seq, task: id, addr: s.tasks[id].addr, add: true})
		}
	case x < 55: // remove, or restart (remove and create a replacement)
		if id, ok := s.pick(s.liveTasks(func(*simTask) bool { return true })); ok {
			if err := s.remove(id); err != nil {
				return err
			}
			if x < 48 {
				return s.create()
			}
		}
	case x < 70: // an agent applies part of its assignment changes
		n := s.nodes[s.r.IntN(len(s.nodes))]
		k := s.r.IntN(len(n.changes) + 1)
		for _, c := range n.changes[:k] {
			if c.add {
				n.containers[c.task] = c.addr
			} else if _, ok := n.containers[c.task]; ok {
				n.stopping[c.task] = true
			}
			n.applied = c.seq
		}
		n.changes = n.changes[k:]
	case x < 80: // a stopping container finally exits
		n := s.nodes[s.r.IntN(len(s.nodes))]
		ids := make([]uint64, 0, len(n.stopping))
		for id := range n.stopping {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if id, ok := s.pick(ids); ok {
			delete(n.stopping, id)
			delete(n.containers, id)
		}
	case x < 88: // an agent collects a sync report
		n := s.nodes[s.r.IntN(len(s.nodes))]
		held := map[uint64]bool{}
		for id := range n.containers {
			held[id] = true
		}
		n.reports = append(n.reports, simReport{seq: n.applied, held: held})
	case x < 98: // a report arrives, possibly late and out of order
		node := 1 + s.r.IntN(len(s.nodes))
		n := s.nodes[node-1]
		if len(n.reports) > 0 {
			i := s.r.IntN(len(n.reports))
			rep := n.reports[i]
			n.reports = slices.Delete(n.reports, i, i+1)
			s.p.ConfirmSync(uint32(node), rep.seq, func(_ netip.Addr, holder uint64) bool { return rep.held[holder] })
		}
	default: // a node crashes, its tasks are orphaned and its quarantine expires
		node := uint32(1 + s.r.IntN(len(s.nodes)))
		n := s.nodes[node-1]
		n.containers, n.stopping, n.reports, n.changes = map[uint64]netip.Addr{}, map[uint64]bool{}, nil, nil
		for _, id := range s.liveTasks(func(t *simTask) bool { return t.node == node }) {
			if err := s.remove(id); err != nil {
				return err
			}
		}
		n.changes, n.applied = nil, n.seq
		s.p.ExpireNode(node)
	}
	return nil
}

// check verifies that every address a container or a live task may use is
// held or quarantined by exactly that task.
func (s *sim) check() error {
	users := map[netip.Addr]uint64{}
	claim := func(a netip.Addr, id uint64, where string) error {
		if other, ok := users[a]; ok && other != id {
			return fmt.Errorf("%s used by task %d and task %d (%s)", a, other, id, where)
		}
		users[a] = id
		if h, ok := s.p.Holder(a); !ok || h != (Holder{KindTask, id}) {
			st, _ := s.p.State(a)
			return fmt.Errorf("%s is used by task %d (%s) but the pool says %s, holder %v", a, id, where, st, h)
		}
		return nil
	}
	for i, n := range s.nodes {
		for id, a := range n.containers {
			if err := claim(a, id, fmt.Sprintf("container on node %d", i+1)); err != nil {
				return err
			}
		}
	}
	for _, id := range s.liveTasks(func(*simTask) bool { return true }) {
		if err := claim(s.tasks[id].addr, id, "live task"); err != nil {
			return err
		}
	}
	return nil
}

// run plays rounds of steps with a save/load between rounds and returns the
// first violation.
func (s *sim) run(rounds, steps int) error {
	for round := range rounds {
		for i := range steps {
			if err := s.step(); err != nil {
				return fmt.Errorf("round %d step %d: %w", round, i, err)
			}
			if err := s.check(); err != nil {
				return fmt.Errorf("round %d step %d: %w", round, i, err)
			}
		}
		b, err := s.p.MarshalBinary()
		if err != nil {
			return err
		}
		var q Pool
		if err := q.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("round %d: reload: %w", round, err)
		}
		if err := q.CheckInvariants(); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		s.p = &q
	}
	return nil
}

func TestSwarmKitRegression(t *testing.T) {
	for seed := range uint64(4) {
		s, err := newSim(seed, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.run(50, 200); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s.next < 1000 {
			t.Fatalf("seed %d: only %d tasks created; the simulation is not exercising reuse", seed, s.next)
		}
	}
}

// TestSwarmKitRegressionDetectsImmediateFree shows the simulation catches
// the original bug: freeing an address when its task is removed.
func TestSwarmKitRegressionDetectsImmediateFree(t *testing.T) {
	s, err := newSim(1, true)
	if err != nil {
		t.Fatal(err)
	}
	err = s.run(60, 200)
	if err == nil {
		t.Fatal("freeing on removal went unnoticed")
	}
	t.Logf("caught as expected: %v", err)
}
