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
func (s *State) Clone() *State {
	c := &State{
		cfg:           s.cfg,
		lastIndex:     s.lastIndex,
		lastTime:      s.lastTime,
		nextTask:      s.nextTask,
		nextService:   s.nextService,
		nextNode:      s.nextNode,
		nextNetwork:   s.nextNetwork,
		managers:      maps.Clone(s.managers),
		services:      make(map[ServiceID]*Service, len(s.services)),
		serviceByName: maps.Clone(s.serviceByName),
		tasks:         make(map[TaskID]*Task, len(s.tasks)),
		nodes:         make(map[NodeID]*Node, len(s.nodes)),
		networks:      make(map[NetworkID]*Network, len(s.networks)),
		removedNodes:  maps.Clone(s.removedNodes),
		pools:         maps.Clone(s.pools),
		waiting:       make(map[TaskID]*Task, len(s.waiting)),
		delayed:       make(map[TaskID]*Task, len(s.delayed)),
		unknown:       make(map[TaskID]*Task, len(s.unknown)),
		updating:      make(map[ServiceID]*Service, len(s.updating)),
		nextDue:       s.nextDue,
	}
	for id, t := range s.tasks {
		ct := *t
		ct.Attachments = slices.Clone(t.Attachments)
		c.tasks[id] = &ct
	}
	for id := range s.waiting {
		c.waiting[id] = c.tasks[id]
	}
	c.waitOrder = slices.Clone(s.waitOrder)
	for id := range s.delayed {
		c.delayed[id] = c.tasks[id]
	}
	for id := range s.unknown {
		c.unknown[id] = c.tasks[id]
	}
	for id, n := range s.nodes {
		cn := *n
		cn.Labels = maps.Clone(n.Labels)
		cn.tasks = make([]*Task, len(n.tasks))
		for i, t := range n.tasks {
			cn.tasks[i] = c.tasks[t.ID]
		}
		c.nodes[id] = &cn
	}
	for id, svc := range s.services {
		cs := *svc
		cs.Spec = cloneSpec(&svc.Spec)
		if svc.PrevSpec != nil {
			p := cloneSpec(svc.PrevSpec)
			cs.PrevSpec = &p
		}
		cs.dirtySlots = nil
		cs.queued, cs.full = false, false
		if svc.restarts != nil {
			cs.restarts = make(map[uint32]*restartRecord, len(svc.restarts))
			for n, rec := range svc.restarts {
				cs.restarts[n] = &restartRecord{SpecVersion: rec.SpecVersion, Times: slices.Clone(rec.Times)}
			}
		}
		cs.slots = make(map[uint32]*slot, len(svc.slots))
		for n, sl := range svc.slots {
			csl := &slot{tasks: make([]*Task, len(sl.tasks))}
			for i, t := range sl.tasks {
				csl.tasks[i] = c.tasks[t.ID]
			}
			cs.slots[n] = csl
		}
		c.services[id] = &cs
		if _, ok := s.updating[id]; ok {
			c.updating[id] = &cs
		}
	}
	for id, nw := range s.networks {
		cn := *nw
		cn.Reserved = slices.Clone(nw.Reserved)
		c.networks[id] = &cn
	}
	s.poolsOwned = nil // shared from now on, by both
	c.ob, c.in = s.ob.clone(), s.in.clone()
	return c
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
	delete(s.pools, id)
	delete(s.poolsOwned, id)
}
