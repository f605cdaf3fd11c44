package statemachine

import (
	"maps"
	"slices"

	"shoal/ipam"
)

// Clone returns a deep copy of the state: changes to either never show in
// the other. Pools are copied through their (deterministic) encoding.
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
		pools:         make(map[NetworkID]*ipam.Pool, len(s.pools)),
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
	for id, p := range s.pools {
		c.pools[id] = p.Clone()
	}
	c.ob, c.in = s.ob.clone(), s.in.clone()
	return c
}
