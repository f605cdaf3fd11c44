package statemachine

import (
	"slices"

	"shoal/sched"
)

// reconcileSlots reconciles the queued slots of svc (all of them when the
// service is marked whole) and returns the slot numbers it looked at, for the
// reaper.
func (s *State) reconcileSlots(svc *Service) []uint32 {
	slots, full := s.takeWork(svc)
	svc.budget = s.stepUpdate(svc)
	if svc.Update.active() && !svc.Remove && svc.budget != 0 && !full {
		// An update moves slot by slot, in slot order, while its budget
		// lasts: the slots that may spend it join the queued ones.
		slots = s.withOutdated(svc, slots)
	}
	if svc.Remove {
		for _, n := range slots {
			if sl := svc.slots.get(n); sl != nil {
				for _, t := range sl.tasks() {
					s.setDesired(t, DesiredRemove)
				}
			}
		}
		s.maybeDeleteService(svc)
		return slots
	}
	if svc.Spec.Mode == ModeGlobal {
		return s.reconcileGlobal(svc)
	}
	// A scale, or a slot that vanished (its last tasks reaped), may leave
	// the service with more or fewer live slots than replicas.
	count := full
	for _, n := range slots {
		count = count || svc.slots.get(n) == nil
	}
	if count {
		slots = append(slots, s.scale(svc)...)
		slices.Sort(slots)
		slots = slices.Compact(slots)
	}
	for _, n := range slots {
		if sl := svc.slots.get(n); sl != nil && !removedSlot(sl) {
			s.reconcileSlot(svc, sl, slotLive)
		}
	}
	return slots
}

// withOutdated returns slots (sorted, as takeWork hands them out or not)
// merged with every slot of svc holding a live task of an older spec
// version: the only slots a rolling update may move that nothing else
// queued. (A slot spends the update's budget only when its survivor is
// outdated, so a survivor-less check here is a superset.) The kept walk,
// fresh after stepUpdate, lists those slots (keptwalk.go).
func (s *State) withOutdated(svc *Service, slots []uint32) []uint32 {
	if w := &svc.walk; !s.walkAll && w.gen != 0 && len(w.stale) == 0 {
		slots = append(slots, w.olds...)
		slices.Sort(slots)
		return slices.Compact(slots)
	}
	for _, n := range svc.slotKeys() {
		for _, t := range svc.slots.get(n).tasks() {
			if t.SpecVersion < svc.SpecVersion && !t.Desired.Stopping() && !t.Status.State.Terminal() {
				slots = append(slots, n)
				break
			}
		}
	}
	slices.Sort(slots)
	return slices.Compact(slots)
}

// reconcileGlobal keeps one task on every eligible node.
func (s *State) reconcileGlobal(svc *Service) []uint32 {
	nodes := s.NodeIDs()
	cons, _ := sched.ParseConstraints(svc.Spec.Constraints) // validated when the spec was accepted
	for _, id := range nodes {
		n := s.nodes[id]
		mode := slotStopAll
		switch {
		case n.Status == NodeDown || n.Availability == AvailDrain || !matchesAll(cons, n):
		case n.Status == NodeDisconnected && !s.cfg.seams.replacesGlobalAside():
			mode = slotNoStart // nothing new can run there while it is away
		case n.Availability == AvailActive:
			mode = slotLive
		default:
			mode = slotNoStart
		}
		if sl := svc.slots.get(uint32(id)); sl != nil {
			s.reconcileSlot(svc, sl, mode)
		} else if mode == slotLive {
			s.newTask(svc, uint32(id))
		}
	}
	slots := svc.slots.keys()
	for _, n := range slots {
		if s.nodes[NodeID(n)] == nil {
			for _, t := range svc.slots.get(n).tasks() {
				s.stopTask(t, StopMoved)
			}
		}
	}
	return slots
}

// matchesAll reports whether node n satisfies every constraint.
func matchesAll(cons []sched.Constraint, n *Node) bool {
	for _, c := range cons {
		if !c.MatchNode(uint32(n.ID), n.Name, n.Role.String(), n.Labels) {
			return false
		}
	}
	return true
}

// runnable: wanted, not finished, and not on a down node.
func (s *State) runnable(t *Task) bool {
	return !t.Desired.Stopping() && !t.Status.State.Terminal() && !s.onDownNode(t)
}

// onDownNode reports whether t's node is gone for t: down, removed, or
// disconnected while t's service has no disconnect window or t was lost
// there (its window passed, or it never ran there).
func (s *State) onDownNode(t *Task) bool {
	if t.Node == 0 {
		return false
	}
	n := s.nodes[t.Node]
	return n == nil || n.Status == NodeDown || (n.Status == NodeDisconnected && (s.window(t).LostAfter == 0 || lost(t)))
}

// stopTask asks a task to stop, recording why. A task that never reached a
// node has nobody to stop it, so it is flagged remove and the reaper deletes
// it.
func (s *State) stopTask(t *Task, why StopReason) {
	if t.StopReason == StopNone {
		s.keepTask(t)
		s.touchTask(t)
		t.StopReason = why
	}
	if t.Status.State <= StatePending {
		s.setDesired(t, DesiredRemove)
		return
	}
	s.setDesired(t, DesiredShutdown)
}

func (s *State) onDrainedNode(t *Task) bool {
	n := s.nodes[t.Node]
	return n != nil && n.Availability == AvailDrain
}

// slotMode is what a slot's node allows reconcileSlot to do.
type slotMode uint8

const (
	// slotLive keeps a task and starts replacements as needed.
	slotLive slotMode = iota
	// slotNoStart keeps what runs but starts nothing (a global service's
	// paused node).
	slotNoStart
	// slotStopAll stops every task (a global service's node went down, was
	// drained or no longer passes the constraints).
	slotStopAll
)

// reconcileSlot keeps at most one runnable, current task in a live slot,
// stops dead and surplus ones, and starts a replacement when the restart
// policy, an update, a move off a drained node or a re-opened slot calls for
// it, as far as mode allows.
func (s *State) reconcileSlot(svc *Service, sl *slot, mode slotMode) {
	keep, create := mode != slotStopAll, mode == slotLive
	var survivor, failed *Task
	var runnable []*Task
	aside := false
	for _, t := range sl.tasks() {
		switch {
		case t.Desired.Stopping():
		case s.heldAside(t):
			aside = true // unknown on a disconnected node: neither stopped nor counted
		case !keep:
			s.stopTask(t, StopMoved)
		case !s.runnable(t):
			s.stopTask(t, StopFailed)
			s.countFailure(svc, t)
			failed = t
		case s.onDrainedNode(t):
			s.stopTask(t, StopMoved)
		default:
			runnable = append(runnable, t)
			if survivor == nil || s.prefer(svc, t, survivor) {
				survivor = t
			}
		}
	}
	for _, t := range runnable {
		switch {
		case t == survivor:
		case t.SpecVersion < survivor.SpecVersion && svc.updateConfig().Order == StartFirst && survivor.Status.State != StateRunning:
			// start-first: the old task serves until the new one runs
		case t.SpecVersion < survivor.SpecVersion:
			s.stopTask(t, StopUpdated)
		default:
			s.stopTask(t, StopSurplus)
		}
	}
	if survivor != nil {
		s.maybePromote(survivor)
	}
	updated := false
	if survivor != nil && survivor.SpecVersion < svc.SpecVersion {
		if svc.budget == 0 {
			return // waits for its turn in the rolling update
		}
		if svc.budget > 0 {
			svc.budget--
		}
		if svc.updateConfig().Order == StartFirst {
			s.newTask(svc, slotNumber(sl)) // the old task stops once this one runs
			return
		}
		s.stopTask(survivor, StopUpdated)
		survivor, updated = nil, true
	}
	if survivor != nil || !keep || !create {
		return
	}
	if aside {
		// A global service's slot is its node: a replacement would be
		// pinned to the node that is away.
		if !svc.Spec.Disconnect.NoReplace && svc.Spec.Mode != ModeGlobal {
			s.newTask(svc, slotNumber(sl)) // the replacement for an unknown original
		}
		return
	}
	newest := sl.tasks()[len(sl.tasks())-1]
	if failed != nil {
		// The restart policy applies to the task that actually failed (an
		// original reporting after a reconnect), not to a newer one the
		// orchestrator stopped.
		newest = failed
	}
	n := slotNumber(sl)
	switch {
	case updated:
		// stop-first: the new task waits at ready until the old one stopped
		s.holdAtReady(s.newTask(svc, n), 0)
	case newest.Desired == DesiredRemove || newest.SpecVersion < svc.SpecVersion:
		s.newTask(svc, n) // a slot that was scaled away and is back, or an old stopped one
	case newest.StopReason == StopFailed:
		// It died: the restart condition and the attempts left decide.
		if s.shouldRestart(svc, newest) && s.attemptsLeft(svc, n) {
			s.recordRestart(svc, n)
			t := s.newTask(svc, n)
			if newest.Status.State == StateRejected && svc.Spec.Restart.Delay > 0 {
				s.keepTask(t)
				t.setHold(0, 0, true) // delayStart sets its times
				t.setMessage(rejectedMessage(svc, newest), nil)
				s.noteWaitMsg(t)
			}
			s.delayStart(t, svc.Spec.Restart.Delay)
		}
	default:
		s.newTask(svc, n) // stopped by the orchestrator (moved off its node), not by failure
	}
}

func slotNumber(sl *slot) uint32 { return sl.tasks()[0].Slot }

// prefer reports whether a should survive over b in one slot: on a
// reconnect the service's reconcile mode decides, otherwise the newer task.
func (s *State) prefer(svc *Service, a, b *Task) bool {
	if reconnected(a) || reconnected(b) {
		return s.keepOnReconnect(svc, a, b)
	}
	return newer(a, b)
}

// newer orders two tasks of a slot: a newer spec version wins, then the
// later-created task.
func newer(a, b *Task) bool {
	if a.SpecVersion != b.SpecVersion {
		return a.SpecVersion > b.SpecVersion
	}
	return a.ID > b.ID
}

// shouldRestart applies the service's restart condition to a dead task.
func (s *State) shouldRestart(svc *Service, t *Task) bool {
	return ShouldRestart(svc.Spec.Restart.Condition, t.Status.State)
}

// ShouldRestart reports whether svc's restart condition replaces a task that
// ended in state st (used by the model checker's liveness condition).
func ShouldRestart(cond RestartCondition, st TaskState) bool {
	switch cond {
	case RestartNone:
		return false
	case RestartOnFailure:
		return st != StateComplete
	}
	return true
}

func (s *State) maybeDeleteService(svc *Service) {
	if !svc.Remove || svc.slots.len() != 0 || s.services[svc.ID] != svc {
		return
	}
	if s.observe != nil {
		s.observe.svcDeleted(svc)
	}
	s.releaseVIPs(svc)
	delete(s.updating, svc.ID)
	delete(s.services, svc.ID)
	delete(s.serviceByName, svc.Spec.Name)
	s.emit(Effect{Kind: EffServiceDeleted, Service: svc.ID})
}
