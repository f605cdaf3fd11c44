package statemachine

import (
	"cmp"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// State keys for the model checker's visited set: a state's digest up to
// node renaming (mcKey tries the node permutations, mcKeyPerm hashes one).

// mcKey identifies a state for de-duplication. It abstracts what cannot
// change any future behaviour: task IDs (only their order inside a slot
// matters, so a task is named by service, slot and position), the ID counter,
// timestamps, history older than the last entry (reconciliation reads only
// the last), and the names of the nodes, which start identical (the key is
// the least over every renaming of the nodes). Two states with one key have
// the same futures up to those names, so exploring one of them is enough.
func mcKey(s *State, m mcMeta) uint64 {
	return mcWithEvents(mcKeyBase(s, m), m.events)
}

// mcWithEvents is the key of a state whose key without its event count is
// base, after events events.
func mcWithEvents(base uint64, events uint8) uint64 {
	return mcMix(base + uint64(events)*0x9e3779b97f4a7c15)
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
	m.events = 0
	var pools []byte
	for _, id := range sortedKeys(s.pools) {
		// The part that names no task and no node: layout, leases,
		// allocation cursors (holders and quarantine: mcKeyPools).
		raw, _ := s.pools[id].MarshalBinary()
		pools = append(pools, mcPoolFixed(raw)...)
	}
	ids := s.NodeIDs()
	perm := make(map[NodeID]NodeID, len(ids))
	var best uint64
	first := true
	var rec func(i int, used uint64)
	rec = func(i int, used uint64) {
		if i == len(ids) {
			if k := mcKeyPerm(s, m, perm, pools); first || k < best {
				best, first = k, false
			}
			return
		}
		for j := range ids {
			if used&(1<<j) == 0 {
				perm[ids[i]] = ids[j]
				rec(i+1, used|1<<j)
			}
		}
	}
	rec(0, 0)
	return best
}

func mcKeyPerm(s *State, m mcMeta, perm map[NodeID]NodeID, pools []byte) uint64 {
	mapNode := func(n NodeID) NodeID {
		if p, ok := perm[n]; ok {
			return p
		}
		return n
	}
	e := encoder{}
	e.byte1(m.events)
	e.byte1(m.created)
	e.i(s.nextDue) // when timers are next looked at changes what happens
	nodes := s.NodeIDs()
	byName := make([]NodeID, len(nodes))
	for i, id := range nodes {
		byName[i] = mapNode(id)
	}
	slices.Sort(byName)
	inv := make(map[NodeID]NodeID, len(perm))
	for k, v := range perm {
		inv[v] = k
	}
	for _, pid := range byName {
		n := s.nodes[inv[pid]]
		e.u(uint64(pid))
		e.byte1(uint8(n.Status))
		e.byte1(uint8(n.Availability))
	}
	e.b = append(e.b, pools...)
	// Outbox, leases being returned, networks the cluster group said are
	// full: they change what allocation and deliveries do next.
	s.encodeRedrive(&e)
	for _, sid := range s.ServiceIDs() {
		svc := s.services[sid]
		e.u(uint64(sid))
		e.str(svc.Spec.Image)
		e.u(uint64(svc.Spec.Replicas))
		e.u(uint64(svc.SpecVersion))
		e.bool(svc.Remove)
		slotNums, tasks := s.SlotTasks(sid)
		order := make([]int, len(slotNums))
		name := func(i int) uint32 {
			if svc.Spec.Mode == ModeGlobal {
				return uint32(mapNode(NodeID(slotNums[i])))
			}
			return slotNums[i]
		}
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(name(a), name(b)) })
		for _, i := range order {
			e.u(uint64(name(i)))
			e.u(uint64(len(tasks[i])))
			for _, t := range tasks[i] {
				e.u(uint64(t.SpecVersion))
				e.u(uint64(mapNode(t.Node)))
				e.byte1(uint8(t.Desired))
				e.byte1(uint8(t.Status.State))
				m, _ := connMarker(t)
				e.byte1(uint8(m.Kind))
				e.u(uint64(t.StopReason))
				e.bool(t.Desired == DesiredReady && t.StartAt != 0)
				for _, at := range t.Attachments {
					e.u(uint64(at.Addr))
					e.bool(at.Released)
				}
			}
		}
	}
	if len(s.pools) > 0 {
		mcKeyPools(s, &e, mapNode)
	}
	return xxhash.Sum64(e.b)
}
