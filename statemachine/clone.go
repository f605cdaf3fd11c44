package statemachine

import (
	"maps"
	"slices"

	"shoal/ipam"
)

// Clone returns a copy of the state: changes to either never show in the
// other. Address pools are shared and copied on their first change
// (poolW), by either state: most steps change no pool, and a pool's copy
// was most of a clone's cost. Clone therefore writes s's list of owned
// pools; s must not be used by another goroutine meanwhile.
func (s *State) Clone() *State { return s.cloneReusing(nil) }

// cloneReusing is Clone into the space of old, a state that nothing reads
// or writes any more (nil: all new): its maps, and its tasks, nodes,
// services, slots and networks of the same IDs, are overwritten instead
// of allocated again. The model checker clones a state for every step it
// tries and drops the copies a moment later; allocating and collecting
// them was a third of its time. The copy equals Clone's
// (TestCloneReusingEqualsClone).
func (s *State) cloneReusing(old *State) *State {
	c := old
	if c == nil {
		c = &State{}
	}
	tasks, nodes, services, networks := c.tasks, c.nodes, c.services, c.networks
	*c = State{
		cfg:           s.cfg,
		walkAll:       s.walkAll,
		settings:      s.settings,
		lastIndex:     s.lastIndex,
		lastTime:      s.lastTime,
		nextTask:      s.nextTask,
		nextService:   s.nextService,
		nextNode:      s.nextNode,
		nextNetwork:   s.nextNetwork,
		managers:      mapInto(c.managers, s.managers),
		services:      mapKeep(services, len(s.services)),
		serviceByName: mapInto(c.serviceByName, s.serviceByName),
		tasks:         tasks.reuse(),
		nodes:         mapKeep(nodes, len(s.nodes)),
		networks:      mapKeep(networks, len(s.networks)),
		networkNames:  mapInto(c.networkNames, s.networkNames),
		removedNodes:  mapInto(c.removedNodes, s.removedNodes),
		joinKeys:      mapInto(c.joinKeys, s.joinKeys),
		req:           s.req.cloneInto(&c.req),
		pools:         mapInto(c.pools, s.pools),
		quarNets:      mapInto(c.quarNets, s.quarNets), // lists are never changed in place
		nWaiting:      s.nWaiting,
		labelSets:     maps.Clone(s.labelSets), // the maps are shared as the nodes' are
		delayed:       mapFor(c.delayed, len(s.delayed)),
		delayedDue:    sliceInto(c.delayedDue, s.delayedDue),
		unknown:       mapFor(c.unknown, len(s.unknown)),
		unknownDue:    sliceInto(c.unknownDue, s.unknownDue),
		updating:      mapFor(c.updating, len(s.updating)),
		waitSvcs:      mapInto(c.waitSvcs, s.waitSvcs),
		nextDue:       s.nextDue,
		ob:            s.ob.cloneReusing(c.ob),
		in:            s.in.cloneReusing(c.in),
	}
	for id, t := range s.tasks.all() {
		ct := tasks.get(id)
		if ct == nil {
			if n := len(t.Attachments); n == 1 || n == 0 && cap(t.Attachments) > 0 {
				ct = allocTask(1, &Task{}) // with room, as t was made
			} else {
				ct = new(Task)
			}
		}
		atts := ct.Attachments // ct's own array (its room, or one it alone holds)
		*ct = *t
		ct.Attachments = sliceInto(atts, t.Attachments)
		c.tasks.set(ct)
	}
	c.tasks.dropMissing(&s.tasks)
	for id := range s.delayed {
		c.delayed[id] = c.tasks.get(id)
	}
	for id := range s.unknown {
		c.unknown[id] = c.tasks.get(id)
	}
	for id, n := range s.nodes {
		cn := nodes[id]
		if cn == nil {
			cn = new(Node)
		}
		nt := cn.tasks
		*cn = *n
		cn.Labels = n.Labels // shared: never changed in place (labelSet)
		cn.tasks = tasksFor(nt, len(n.tasks))
		for i, t := range n.tasks {
			cn.tasks[i] = c.tasks.get(t.ID)
		}
		c.nodes[id] = cn
	}
	dropMissing(c.nodes, s.nodes)
	for id, svc := range s.services {
		cs := services[id]
		if cs == nil {
			cs = new(Service)
		}
		slots, restarts, waitQ := cs.slots, cs.restarts, cs.waitQ
		*cs = *svc
		cs.waitQ = sliceInto(waitQ, svc.waitQ)
		cs.Spec = cloneSpec(&svc.Spec)
		if svc.PrevSpec != nil {
			p := cloneSpec(svc.PrevSpec)
			cs.PrevSpec = &p
		}
		cs.dirtySlots = nil
		cs.queued, cs.full = false, false
		cs.walk = updateWalk{} // the clone walks its slots afresh
		cs.restarts = nil
		if svc.restarts != nil {
			cs.restarts = mapFor(restarts, len(svc.restarts))
			for n, rec := range svc.restarts {
				cs.restarts[n] = &restartRecord{SpecVersion: rec.SpecVersion, Times: slices.Clone(rec.Times)}
			}
		}
		cs.slots = slotIndex{}
		for n, sl := range svc.slots.all() {
			csl := slots.get(n)
			if csl == nil {
				csl = newSlot()
			}
			csl.cloneTasks(sl.tasks(), c.tasks.get)
			csl.dirty, csl.live = false, sl.live
			cs.slots.set(n, csl)
		}
		c.services[id] = cs
		if _, ok := s.updating[id]; ok {
			c.updating[id] = cs
		}
	}
	dropMissing(c.services, s.services)
	for id, nw := range s.networks {
		cn := networks[id]
		if cn == nil {
			cn = new(Network)
		}
		*cn = *nw
		cn.Reserved = slices.Clone(nw.Reserved)
		c.networks[id] = cn
	}
	dropMissing(c.networks, s.networks)
	s.poolsOwned = nil // shared from now on, by both
	return c
}

// mapFor returns old emptied, or a new map for n entries when old is nil.
func mapFor[M ~map[K]V, K comparable, V any](old M, n int) M {
	if old == nil {
		return make(M, n)
	}
	clear(old)
	return old
}

// mapKeep returns old as it is, its objects to be overwritten by the
// caller's copies (dropMissing then removes the entries not copied), or a
// new map for n entries when old is nil.
func mapKeep[M ~map[K]V, K comparable, V any](old M, n int) M {
	if old == nil {
		return make(M, n)
	}
	return old
}

// dropMissing deletes from m the keys that src does not have.
func dropMissing[M ~map[K]V, N ~map[K]W, K comparable, V, W any](m M, src N) {
	if len(m) == len(src) {
		return // every key of src was written into m
	}
	for k := range m {
		if _, ok := src[k]; !ok {
			delete(m, k)
		}
	}
}

// mapInto is maps.Clone(src) in old's space.
func mapInto[M ~map[K]V, K comparable, V any](old, src M) M {
	if src == nil || old == nil {
		return maps.Clone(src)
	}
	clear(old)
	for k, v := range src {
		old[k] = v
	}
	return old
}

// sliceInto is slices.Clone(src) in old's space.
func sliceInto[S ~[]E, E any](old, src S) S {
	if src == nil || old == nil {
		return slices.Clone(src)
	}
	return append(old[:0], src...)
}

// tasksFor is make([]*Task, n) in old's space.
func tasksFor(old []*Task, n int) []*Task {
	if old == nil || cap(old) < n {
		return make([]*Task, n)
	}
	return old[:n]
}

// poolW returns network id's pool for a change: the state's own copy,
// made now if the pool may be shared with a clone. Every change to a pool
// goes through it; reads use s.pools.
func (s *State) poolW(id NetworkID) *ipam.Pool {
	p := s.pools[id]
	if p == nil || s.poolsOwned[id] {
		return p
	}
	p = p.Clone()
	s.setPool(id, p)
	return p
}

// setPool installs p, which no other state holds, as network id's pool.
func (s *State) setPool(id NetworkID, p *ipam.Pool) {
	s.pools[id] = p
	if s.poolsOwned == nil {
		s.poolsOwned = make(map[NetworkID]bool, len(s.pools))
	}
	s.poolsOwned[id] = true
}

// deletePool removes network id's pool.
func (s *State) deletePool(id NetworkID) {
	p := s.pools[id]
	delete(s.pools, id)
	delete(s.poolsOwned, id)
	if p != nil {
		for _, n := range p.QuarantineNodes() {
			s.noteQuarantine(NodeID(n), id)
		}
	}
}
