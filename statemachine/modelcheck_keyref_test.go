package statemachine

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
	"shoal/ipam"
)

// A naive reference for the model checker's state key: the key as first
// written (the budgets inside every renaming's digest, maps and fresh
// slices everywhere), kept to check that the faster mcKey draws the same
// classes: two states share an mcKey exactly when they share a reference
// key.

func mcKeyRef(s *State, m mcMeta) uint64 {
	pools := []byte{}
	for _, id := range sortedKeys(s.pools) {
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
			if k := mcKeyRefPerm(s, m, perm, pools); first || k < best {
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

func mcKeyRefPerm(s *State, m mcMeta, perm map[NodeID]NodeID, pools []byte) uint64 {
	mapNode := func(n NodeID) NodeID {
		if p, ok := perm[n]; ok {
			return p
		}
		return n
	}
	e := encoder{}
	e.byte1(m.events)
	e.byte1(m.created)
	if s.nextDue != 0 {
		e.i(s.nextDue - s.lastTime)
	} else {
		e.i(-1)
	}
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
				mcKeyTask(&e, t, mapNode(t.Node))
			}
		}
	}
	if len(s.pools) > 0 {
		mcKeyRefPools(s, &e, mapNode)
	}
	return xxhash.Sum64(e.b)
}

func mcKeyRefPools(s *State, e *encoder, mapNode func(NodeID) NodeID) {
	names := make(map[TaskID]uint64, s.tasks.len())
	for _, sid := range s.ServiceIDs() {
		svc := s.services[sid]
		for n, sl := range svc.slots.all() {
			if svc.Spec.Mode == ModeGlobal {
				n = uint32(mapNode(NodeID(n)))
			}
			for pos, t := range sl.tasks() {
				names[t.ID] = uint64(sid)<<40 | uint64(n)<<8 | uint64(pos) + 1
			}
		}
	}
	for _, id := range s.waitingIDs() {
		e.u(names[id])
	}
	for _, pid := range sortedKeys(s.pools) {
		p := s.pools[pid]
		pfx := p.Prefix()
		for a, i := pfx.Masked().Addr(), 0; pfx.Contains(a) && i < 1<<10; a, i = a.Next(), i+1 {
			h, ok := p.Holder(a)
			if !ok {
				continue
			}
			e.u(uint64(addrU32(a)))
			e.byte1(uint8(h.Kind))
			if h.Kind == ipam.KindVIP {
				e.u(h.ID)
			} else {
				e.u(names[TaskID(h.ID)]) // 0: gone
			}
		}
		type qn struct {
			node NodeID
			keys []uint64
		}
		var qs []qn
		for _, raw := range p.QuarantineNodes() {
			// (address, holder) pairs in address order, no sequence
			// numbers (see mcKeyPools)
			q := qn{node: mapNode(NodeID(raw))}
			entries := p.Quarantine(raw)
			slices.SortFunc(entries, func(a, b ipam.QuarantineEntry) int { return a.Addr.Compare(b.Addr) })
			for _, en := range entries {
				q.keys = append(q.keys, uint64(addrU32(en.Addr)), names[TaskID(en.Holder)])
			}
			qs = append(qs, q)
		}
		slices.SortFunc(qs, func(a, b qn) int { return int(a.node) - int(b.node) })
		for _, q := range qs {
			e.u(uint64(q.node))
			e.u(uint64(len(q.keys)))
			for _, k := range q.keys {
				e.u(k)
			}
		}
	}
}

// TestModelCheckKeyMatchesReference explores concrete states (told apart
// by their full encoding) and checks that mcKey and the reference key
// draw the same classes on them.
func TestModelCheckKeyMatchesReference(t *testing.T) {
	for _, b := range []mcBounds{
		{nodes: 2, replicas: 2, retained: 1, events: 1, net: true},
		{nodes: 2, replicas: 2, retained: 1, events: 1},
		{nodes: 2, replicas: 2, retained: 1, events: 1, manual: true},
	} {
		t.Run(fmt.Sprintf("net=%v,manual=%v", b.net, b.manual), func(t *testing.T) {
			toRef, toKey := map[uint64]uint64{}, map[uint64]uint64{}
			known, unexpanded := mcExploreConcrete(t, b, 5000, false, func(cur mcStateMeta, _ []mcStep) {
				k, r := mcKey(cur.s, cur.m), mcKeyRef(cur.s, cur.m)
				if old, ok := toRef[k]; ok && old != r {
					t.Fatalf("key %x covers reference keys %x and %x: it merges states the reference tells apart", k, old, r)
				}
				if old, ok := toKey[r]; ok && old != k {
					t.Fatalf("reference key %x has keys %x and %x: the key tells apart states the reference merges", r, old, k)
				}
				toRef[k], toKey[r] = r, k
			})
			t.Logf("%d concrete states, %d keys", known, len(toRef))
			if len(toRef) >= known-unexpanded {
				t.Fatal("no two states shared a key: the check checked nothing")
			}
		})
	}
}
