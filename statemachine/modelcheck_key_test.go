package statemachine

import (
	"cmp"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	"shoal/ipam"
)

// State keys for the model checker's visited set: a state's digest up to
// node renaming (mcStateKey tries the node permutations, mcKeyPerm hashes
// one), with the checker's budgets mixed in afterwards.

// mcKey identifies a state for de-duplication. It abstracts what cannot
// change any future behaviour: task IDs (only their order inside a slot
// matters, so a task is named by service, slot and position), the ID counter,
// timestamps, history older than the last entry (reconciliation reads only
// the last), and the names of the nodes, which start identical (the key is
// the least over every renaming of the nodes). Two states with one key have
// the same futures up to those names, so exploring one of them is enough.
func mcKey(s *State, m mcMeta) uint64 {
	return mcWithEvents(mcBaseOf(mcStateKey(s), m), m.events)
}

// mcWithEvents is the key of a state whose key without its event count is
// base, after events events.
func mcWithEvents(base uint64, events uint8) uint64 {
	return mcMix(base + uint64(events)*0x9e3779b97f4a7c15)
}

// mcBaseOf is the key without the event count of a state whose state key
// is sk, with budgets m. The budgets name no node, so taking the least over
// the renamings before mixing them in gives the same classes as mixing them
// into every renaming's digest; it lets a step be compared with its source
// state (did it change anything?) with one digest.
func mcBaseOf(sk uint64, m mcMeta) uint64 {
	return mcMix(sk + (uint64(m.created)+1)*0xbf58476d1ce4e5b9)
}

// mcSubsumed reports whether the state whose key without its event count
// is base was seen after fewer events than m's: its futures then include
// every future of this one (the event budget only takes actions away, and
// nothing else reads the count), so this one need not be explored.
func mcSubsumed(seen *mcSet, base uint64, m mcMeta) bool {
	for e := uint8(0); e < m.events; e++ {
		if seen.has(mcWithEvents(base, e)) {
			return true
		}
	}
	return false
}

// mcKeyBase is mcKey without the event count.
func mcKeyBase(s *State, m mcMeta) uint64 {
	return mcBaseOf(mcStateKey(s), m)
}

// mcScratch is the reusable space of one key computation (keys are
// computed millions of times: allocation was most of their cost).
type mcScratch struct {
	e     encoder
	pools []byte
	perm  []NodeID // perm[id]: the name of node id (0: itself)
	nodes []NodeID
	slots []uint32
	order []int
	names map[TaskID]mcTaskName
	// fixed holds the key's part of shared pools (no state changes them
	// any more; the map holds them, so a pointer is not reused). Most
	// are decoded pools (mcPools), a few hundred; the cap clears the
	// others, which steps make and are mostly keyed once.
	fixed  map[*ipam.Pool][]byte
	parts  map[*ipam.Pool]*mcPoolPart // the same pools' holders and quarantines
	qnodes []mcQuarNode
	// per state, for every renaming: the pools' and waiting tasks' data,
	// the redrive encoding, the services in ID order
	pd      mcKeyPoolData
	redrive []byte
	svcs    []ServiceID
}

var mcScratchPool = sync.Pool{New: func() any {
	return &mcScratch{names: map[TaskID]mcTaskName{}, fixed: map[*ipam.Pool][]byte{}, parts: map[*ipam.Pool]*mcPoolPart{}}
}}

// mcStateKey is the least digest of s over every renaming of its nodes.
func mcStateKey(s *State) uint64 {
	sc := mcScratchPool.Get().(*mcScratch)
	defer mcScratchPool.Put(sc)
	sc.pools = sc.pools[:0]
	for _, id := range sortedKeys(s.pools) {
		// The part that names no task and no node: layout, leases,
		// allocation cursors (holders and quarantine: mcKeyPools).
		sc.pools = append(sc.pools, sc.poolFixed(s, id)...)
	}
	mcTaskNames(s, sc.names)
	if len(s.pools) > 0 {
		mcPrepPools(s, &sc.pd, sc.parts)
	}
	sc.e.b = sc.e.b[:0]
	s.encodeRedrive(&sc.e)
	sc.redrive = append(sc.redrive[:0], sc.e.b...)
	sc.svcs = append(sc.svcs[:0], s.ServiceIDs()...)
	sc.nodes = sc.nodes[:0]
	maxID := NodeID(0)
	for id := range s.nodes {
		sc.nodes = append(sc.nodes, id)
		maxID = max(maxID, id)
	}
	slices.Sort(sc.nodes)
	sc.perm = slices.Grow(sc.perm[:0], int(maxID)+1)[:int(maxID)+1]
	clear(sc.perm)
	ids := sc.nodes
	var best uint64
	first := true
	var rec func(i int, used uint64)
	rec = func(i int, used uint64) {
		if i == len(ids) {
			if k := mcKeyPerm(s, sc); first || k < best {
				best, first = k, false
			}
			return
		}
		for j := range ids {
			if used&(1<<j) == 0 {
				sc.perm[ids[i]] = ids[j]
				rec(i+1, used|1<<j)
			}
		}
	}
	rec(0, 0)
	return best
}

// mapNode is node n's name under the renaming being hashed.
func (sc *mcScratch) mapNode(n NodeID) NodeID {
	if int(n) < len(sc.perm) && sc.perm[n] != 0 {
		return sc.perm[n]
	}
	return n
}

func mcKeyPerm(s *State, sc *mcScratch) uint64 {
	e := &sc.e
	e.b = e.b[:0]
	// When timers are next looked at changes what happens; every pending
	// timer was set at the last entry's time (mcFar), so only the delay
	// from it matters.
	if s.nextDue != 0 {
		e.i(s.nextDue - s.lastTime)
	} else {
		e.i(-1)
	}
	// the nodes in the order of their new names
	sc.order = sc.order[:0]
	for i := range sc.nodes {
		sc.order = append(sc.order, i)
	}
	slices.SortFunc(sc.order, func(a, b int) int { return cmp.Compare(sc.mapNode(sc.nodes[a]), sc.mapNode(sc.nodes[b])) })
	for _, i := range sc.order {
		n := s.nodes[sc.nodes[i]]
		e.u(uint64(sc.mapNode(n.ID)))
		e.byte1(uint8(n.Status))
		e.byte1(uint8(n.Availability))
	}
	e.b = append(e.b, sc.pools...)
	// Outbox, leases being returned, networks the cluster group said are
	// full: they change what allocation and deliveries do next.
	e.b = append(e.b, sc.redrive...)
	for _, sid := range sc.svcs {
		svc := s.services[sid]
		e.u(uint64(sid))
		e.str(svc.Spec.Image)
		e.u(uint64(svc.Spec.Replicas))
		e.u(uint64(svc.SpecVersion))
		e.bool(svc.Remove)
		global := svc.Spec.Mode == ModeGlobal
		name := func(n uint32) uint32 {
			if global {
				return uint32(sc.mapNode(NodeID(n)))
			}
			return n
		}
		sc.slots = sc.slots[:0]
		for n := range svc.slots.all() {
			sc.slots = append(sc.slots, n)
		}
		slices.SortFunc(sc.slots, func(a, b uint32) int { return cmp.Compare(name(a), name(b)) })
		for _, n := range sc.slots {
			tasks := svc.slots.get(n).tasks()
			e.u(uint64(name(n)))
			e.u(uint64(len(tasks)))
			for _, t := range tasks {
				mcKeyTask(e, t, sc.mapNode(t.Node))
			}
		}
	}
	if len(s.pools) > 0 {
		mcKeyPools(sc)
	}
	return xxhash.Sum64(e.b)
}

// poolFixed is the part of network id's pool that names no task and no
// node (mcPoolFixed), kept for shared pools.
func (sc *mcScratch) poolFixed(s *State, id NetworkID) []byte {
	p := s.pools[id]
	shared := !s.poolsOwned[id]
	if f, ok := sc.fixed[p]; ok && shared {
		return f
	}
	raw, _ := p.MarshalBinary()
	f := mcPoolFixed(raw)
	if shared {
		if len(sc.fixed) >= mcPoolsCap {
			clear(sc.fixed)
		}
		sc.fixed[p] = f
	}
	return f
}

// mcKeyTask encodes what the key keeps of task t, whose node is named
// node under the renaming being hashed (the key and its reference share
// it: they differ in how they gather and rename, not in what a task is).
func mcKeyTask(e *encoder, t *Task, node NodeID) {
	e.u(uint64(t.SpecVersion))
	e.u(uint64(node))
	e.byte1(uint8(t.Desired))
	e.byte1(uint8(t.Status.State))
	m, _ := connMarker(t)
	e.byte1(uint8(m.Kind))
	e.u(uint64(t.StopReason))
	e.bool(t.Desired == DesiredReady && t.StartAt() != 0)
	for _, at := range t.Attachments {
		e.u(uint64(at.Addr))
		e.bool(at.Released)
	}
}
