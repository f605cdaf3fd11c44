package statemachine

import (
	"cmp"
	"fmt"
	"slices"

	"shoal/internal/invariants"
)

// The reaction scheduler: commands mark services and slots dirty; at the
// end of a batch react runs the orchestrator, allocator and reaper over
// exactly the marked work, and timers fires what came due at the entry's
// time (NextDue tells the leader when to send a tick).

// timers fires what is due at s.now: delayed restarts start, unknown
// originals past their disconnect window are lost (and their slots
// reconciled at once).
func (s *State) timers() {
	if s.nextDue == 0 || s.now < s.nextDue {
		return
	}
	s.nextDue = 0
	s.loseExpired()
	for _, id := range sortedKeys(s.updating) {
		s.queue(s.updating[id]) // a rolling update may move on now
	}
	if !s.cfg.ManualReactions {
		s.react()
	}
	s.promoteDue()
}

// markDirty queues a whole service for the end-of-batch reactions.
func (s *State) markDirty(svc *Service) {
	if svc == nil {
		return
	}
	svc.full = true
	s.queue(svc)
}

// markSlot queues one slot of a service for the end-of-batch reactions.
func (s *State) markSlot(svc *Service, n uint32) {
	if svc == nil || svc.full {
		s.markDirty(svc)
		return
	}
	if sl := svc.slots.get(n); sl != nil {
		if sl.dirty {
			return
		}
		sl.dirty = true
	}
	svc.dirtySlots = append(svc.dirtySlots, n)
	s.queue(svc)
}

func (s *State) queue(svc *Service) {
	if !svc.queued {
		svc.queued = true
		s.dirty = append(s.dirty, svc)
	}
}

// takeWork returns the slots of svc to look at (all of them when the whole
// service is dirty) and clears its marks.
func (s *State) takeWork(svc *Service) (slots []uint32, full bool) {
	full = svc.full
	slots = svc.dirtySlots
	svc.full, svc.queued, svc.dirtySlots = false, false, nil
	if full {
		for _, sl := range svc.slots.all() {
			sl.dirty = false
		}
		return svc.slotKeys(), true
	}
	for _, n := range slots {
		if sl := svc.slots.get(n); sl != nil {
			sl.dirty = false
		}
	}
	slices.Sort(slots)
	return slices.Compact(slots), false
}

// reactPasses bounds react's passes: each can only delete tasks or fill
// empty slots, so a few reach the fixpoint.
const reactPasses = 4

// react runs the orchestrator, allocator and reaper over what the batch
// touched, until nothing changes. Built with -tags shoal_invariants, it
// panics if reactPasses passes left work (see checkFixpoint).
func (s *State) react() {
	for pass := 0; pass < reactPasses && (len(s.dirty) > 0 || len(s.newTasks) > 0); pass++ {
		work := slices.Clone(s.dirty)
		clear(s.dirty)
		s.dirty = s.dirty[:0]
		slices.SortFunc(work, func(a, b *Service) int { return cmp.Compare(a.ID, b.ID) })
		slotLists := make([][]uint32, len(work))
		for i, svc := range work {
			slotLists[i] = s.reconcileSlots(svc)
		}
		// As in a pass over the waiting tasks, nothing is released while
		// the new tasks are tried, so a network found full stays full:
		// the service's later new tasks get the same answer without
		// another attempt. Trying each anew, the 10,000 tasks of a
		// service created before its group held a block of its network
		// (as every service of a ramp is) were 10,000 refused attempts,
		// each formatting its refusal: a third of the create entry.
		if len(s.newTasks) > 0 {
			s.fullNets = map[string]error{}
		}
		for _, t := range s.newTasks {
			if t.Status.State == StateNew && s.tasks.get(t.ID) == t {
				s.allocateTask(t)
			}
		}
		s.fullNets = nil
		clear(s.newTasks)
		s.newTasks = s.newTasks[:0]
		for i, svc := range work {
			if s.services[svc.ID] == svc {
				s.reapSlots(svc, slotLists[i])
			}
		}
	}
	if invariants.Enabled {
		s.checkFixpoint()
	}
}

// checkFixpoint panics if react stopped with work left: a service still
// queued or a new task not yet allocated, which the next entry would act
// on instead of this one.
func (s *State) checkFixpoint() {
	if len(s.dirty) == 0 && len(s.newTasks) == 0 {
		return
	}
	var svcs []string
	for _, svc := range s.dirty {
		svcs = append(svcs, svc.Spec.Name)
	}
	panic(fmt.Sprintf("statemachine: react left work after %d passes at index %d: services %v still dirty, %d new tasks unallocated",
		reactPasses, s.index, svcs, len(s.newTasks)))
}

// NextDue is the earliest time (unix nanoseconds) at which a timer of this
// state may fire — a delayed restart, a disconnect window, a rolling
// update's next step — or 0 when none is pending. The leader proposes a
// CmdTick once its clock passes it.
func (s *State) NextDue() int64 { return s.nextDue }
