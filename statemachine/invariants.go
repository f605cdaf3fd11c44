package statemachine

import (
	"errors"
	"fmt"
	"slices"

	"shoal/ipam"
)

// CheckInvariants checks the state invariants of DESIGN.md that a single
// state can show (1–4, plus the consistency of every index) and returns
// all violations joined, or nil. Invariants about steps (5, 7) and addresses
// (6) need two states or the address pools; the model checker checks steps.
func (s *State) CheckInvariants() error { return s.checkInvariants((*ipam.Pool).CheckInvariants) }

// checkInvariants is CheckInvariants with checkPool checking each address
// pool (the model checker's remembers the pools it found sound: its states
// share a few hundred pools, which no state changes in place).
func (s *State) checkInvariants(checkPool func(*ipam.Pool) error) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	inSlots := 0
	errs = append(errs, s.checkWaitQueues()...)
	errs = append(errs, s.checkOrder()...)
	queued := make(map[TaskID]bool, len(s.delayedDue))
	for _, e := range s.delayedDue {
		queued[e.id] = true
	}
	for id, t := range s.tasks.all() {
		if delayedFacts(t, nil) && (s.delayed[id] != t || !queued[id]) {
			bad("task %d is held at desired ready until %d but is not in the delayed index and its queue", id, t.StartAt())
		}
	}
	windowEnds := make(map[dueEntry]bool, len(s.unknownDue))
	for _, e := range s.unknownDue {
		windowEnds[e] = true
	}
	for id, t := range s.tasks.all() {
		if heldAsideFacts(t, s.nodes[t.Node]) && s.awaited(t) && !windowEnds[dueEntry{lostAt(t, s.services[t.Service]), id}] {
			bad("task %d is unknown on a disconnected node but its window's end is not queued", id)
		}
	}
	if len(s.networkNames) != len(s.networks) {
		bad("the network name index has %d names for %d networks", len(s.networkNames), len(s.networks))
	}
	for id, nw := range s.networks {
		if s.networkNames[nw.Name] != id {
			bad("network %d %q missing from the name index", id, nw.Name)
		}
	}
	if err := s.checkKeptWalks(); err != nil {
		bad("%v", err)
	}
	for _, sid := range s.ServiceIDs() {
		svc := s.services[sid]
		if s.serviceByName[svc.Spec.Name] != sid {
			bad("service %d %q missing from the name index", sid, svc.Spec.Name)
		}
		if c := countServiceTasks(svc); c != svc.counts {
			bad("service %q counts %+v but its slots hold %+v", svc.Spec.Name, svc.counts, c)
		}
		if svc.slotOrder != nil && !slices.Equal(svc.slotOrder, svc.slots.keys()) {
			bad("service %q caches slots %v but has %v", svc.Spec.Name, svc.slotOrder, svc.slots.keys())
		}
		for _, n := range svc.slots.keys() {
			sl := svc.slots.get(n)
			if len(sl.tasks()) == 0 {
				bad("service %q slot %d is empty but listed", svc.Spec.Name, n)
			}
			if t := sl.one[0]; t != nil && sl.many != nil {
				bad("service %q slot %d keeps task %d in place but lists %d tasks elsewhere", svc.Spec.Name, n, t.ID, len(*sl.many))
			}
			if sl.many != nil && len(*sl.many) < 2 {
				bad("service %q slot %d keeps %d tasks in an array of its own, not in place", svc.Spec.Name, n, len(*sl.many))
			}
			for i, t := range sl.tasks() {
				inSlots++
				if s.tasks.get(t.ID) != t {
					bad("service %q slot %d lists task %d that the store does not hold", svc.Spec.Name, n, t.ID)
				}
				if t.Service != sid || t.Slot != n {
					bad("task %d listed in %q slot %d but says service %d slot %d", t.ID, svc.Spec.Name, n, t.Service, t.Slot)
				}
				if i > 0 && sl.tasks()[i-1].ID >= t.ID {
					bad("service %q slot %d tasks out of order", svc.Spec.Name, n)
				}
			}
		}
	}
	for _, id := range s.TaskIDs() {
		t := s.tasks.get(id)
		if t.ID != id {
			bad("inv4: task stored under %d has ID %d", id, t.ID)
		}
		if s.services[t.Service] == nil {
			bad("inv1: task %d belongs to service %d, which does not exist", id, t.Service)
		}
		if !t.Status.State.Valid() {
			bad("inv3: task %d has observed state %d, which is not a task state", id, t.Status.State)
		}
		if t.Desired >= numDesiredStates {
			bad("task %d has desired state %d", id, t.Desired)
		}
		if t.Status.State >= StateAssigned && t.Node == 0 && t.Status.State != StateRejected {
			bad("inv2: task %d is %s without a node", id, t.Status.State)
		}
		if n := s.nodes[t.Node]; n != nil {
			if t.nodePos < 0 || int(t.nodePos) >= len(n.tasks) || n.tasks[t.nodePos] != t {
				bad("task %d is not listed on its node %d", id, t.Node)
			}
		} else if t.nodePos >= 0 {
			bad("task %d has a node position but node %d does not exist", id, t.Node)
		}
	}
	if inSlots != s.tasks.len() {
		bad("inv4: %d tasks in slots but %d in the store (a task lost or listed twice)", inSlots, s.tasks.len())
	}
	for _, nid := range s.NodeIDs() {
		for i, t := range s.nodes[nid].tasks {
			if t.Node != nid || int(t.nodePos) != i || s.tasks.get(t.ID) != t {
				bad("node %d lists task %d wrongly", nid, t.ID)
			}
		}
	}
	errs = append(errs, s.checkAddresses(checkPool)...)
	errs = append(errs, s.checkQuarantineLists()...)
	return errors.Join(errs...)
}
