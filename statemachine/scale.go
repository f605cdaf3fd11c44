package statemachine

import (
	"cmp"
	"slices"
)

// Scaling a replicated service (SwarmKit's rule). A service has `replicas`
// live slots; their numbers need not be 1..replicas. A slot is live while
// any of its tasks is not flagged remove; a scale-down flags every task of
// the slots it gives up, and such a slot disappears once its tasks are
// confirmed terminal and reaped.
//
// Which slots a scale-down gives up, in order:
//
//  1. slots with no task on a node (not yet assigned, or nothing runnable
//     left): a running task is never stopped while one that never started
//     is kept;
//  2. then slots on the nodes that hold the most slots of the service: each
//     assigned slot is the k-th of its node, and the highest k goes first,
//     so the service stays spread;
//  3. ties: a task not yet running before a running one, then the higher
//     slot number.
//
// A scale-up creates slots with the lowest numbers that are not live (a
// number still held by a slot being scaled away is reused: its old tasks
// stop as before, beside the new one).

// removedSlot reports whether every task of sl is flagged remove: the slot
// was scaled away (or its service removed) and waits for its tasks to go.
func removedSlot(sl *slot) bool {
	for i := len(sl.tasks()) - 1; i >= 0; i-- {
		if sl.tasks()[i].Desired != DesiredRemove {
			return false
		}
	}
	return true
}

// holder is the task a live slot counts on: its newest runnable task, or
// nil when nothing in it can run (dead, or waiting to be replaced).
func (s *State) holder(sl *slot) *Task {
	for i := len(sl.tasks()) - 1; i >= 0; i-- {
		if t := sl.tasks()[i]; s.runnable(t) {
			return t
		}
	}
	return nil
}

// scale brings the number of live slots of a replicated service to its
// replica count: it flags the slots a scale-down gives up and creates the
// slots a scale-up needs. It returns the slot numbers it changed.
func (s *State) scale(svc *Service) []uint32 {
	var live []uint32
	for _, n := range svc.slotKeys() {
		if !removedSlot(svc.slots.get(n)) {
			live = append(live, n)
		}
	}
	want := int(svc.Spec.Replicas)
	if len(live) > want {
		victims := s.scaleDownVictims(svc, live, len(live)-want)
		for _, n := range victims {
			for _, t := range svc.slots.get(n).tasks() {
				s.setDesired(t, DesiredRemove)
			}
			delete(svc.restarts, n) // a later slot of that number starts afresh
		}
		return victims
	}
	var created []uint32
	next := uint32(1)
	for i := 0; len(live)+len(created) < want; {
		for i < len(live) && live[i] < next {
			i++
		}
		if i < len(live) && live[i] == next {
			next++
			continue
		}
		s.newTask(svc, next)
		created = append(created, next)
		next++
	}
	return created
}

// scaleDownVictims picks k of the live slots to give up, in the order the
// comment at the top of this file gives.
func (s *State) scaleDownVictims(svc *Service, live []uint32, k int) []uint32 {
	type cand struct {
		slot    uint32
		node    NodeID // 0: nothing on a node
		running bool
		nth     int // the slot is the nth (from 0) of its node
	}
	cands := make([]cand, len(live))
	for i, n := range live {
		c := cand{slot: n}
		if h := s.holder(svc.slots.get(n)); h != nil && h.Node != 0 {
			c.node, c.running = h.Node, h.Status.State == StateRunning
		}
		cands[i] = c
	}
	// Number each node's slots, running ones first, so that the running
	// ones are the last a node gives up.
	slices.SortFunc(cands, func(a, b cand) int {
		if c := cmp.Compare(a.node, b.node); c != 0 {
			return c
		}
		if a.running != b.running {
			if a.running {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.slot, b.slot)
	})
	for i := range cands {
		if i > 0 && cands[i].node != 0 && cands[i].node == cands[i-1].node {
			cands[i].nth = cands[i-1].nth + 1
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if (a.node == 0) != (b.node == 0) {
			if a.node == 0 {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.nth, a.nth); c != 0 {
			return c
		}
		if a.running != b.running {
			if !a.running {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.slot, a.slot)
	})
	victims := make([]uint32, k)
	for i := range victims {
		victims[i] = cands[i].slot
	}
	slices.Sort(victims)
	return victims
}
