package statemachine

// The reaper: which tasks may be deleted (DESIGN.md, "reaper" in the
// transition table) — new/pending tasks flagged remove, terminal tasks
// flagged remove, terminal tasks beyond their slot's history retention and
// orphaned tasks wanted stopped — and the explicit CmdReap.

// Reapable reports whether the reaper may delete t (DESIGN.md): never-placed
// tasks flagged remove, terminal tasks flagged remove, and orphaned tasks
// that are wanted stopped. History beyond retention is handled per slot.
func (s *State) reapable(t *Task) bool {
	st := t.Status.State
	if t.Desired == DesiredRemove && (st <= StatePending || st.Terminal()) {
		return true
	}
	if st == StateOrphaned && t.Desired.Stopping() {
		return true
	}
	return s.cfg.seams.reapsLive(st)
}

// reapSlots deletes what the reaper may in the given slots of svc: flagged
// tasks, and the oldest finished tasks beyond the slot's history retention.
func (s *State) reapSlots(svc *Service, slots []uint32) {
	for _, n := range slots {
		s.reapSlot(svc, n)
	}
	s.maybeDeleteService(svc)
}

func (s *State) reapSlot(svc *Service, n uint32) {
	sl := svc.slots.get(n)
	if sl == nil {
		return
	}
	for i := 0; i < len(sl.tasks()); {
		t := sl.tasks()[i]
		if s.reapable(t) {
			s.deleteTask(t, false)
			if svc.slots.get(n) == nil {
				return
			}
			continue
		}
		i++
	}
	for i := 0; len(sl.tasks()) > s.settings.TaskHistoryLimit && i < len(sl.tasks()); {
		t := sl.tasks()[i]
		if t.Status.State.Terminal() && t.Desired.Stopping() {
			s.deleteTask(t, true)
			if svc.slots.get(n) == nil {
				return
			}
			continue
		}
		i++
	}
}

// reapCmd is the reaper's explicit form: delete one task if allowed.
func (s *State) reapCmd(id TaskID) Result {
	t := s.tasks.get(id)
	if t == nil {
		return reject(CodeNotFound, "task %d does not exist", id)
	}
	svc := s.services[t.Service]
	beyond := s.beyondRetention(svc, t)
	if !s.reapable(t) && !beyond {
		return reject(CodeNotAllowed, "task %d (%s, desired %s) may not be deleted yet", id, t.Status.State, t.Desired)
	}
	s.deleteTask(t, beyond && !s.reapable(t))
	if svc != nil {
		s.maybeDeleteService(svc)
	}
	return Result{ID: uint64(id)}
}

// beyondRetention reports whether t is the oldest finished task of a slot
// holding more than the retention limit.
func (s *State) beyondRetention(svc *Service, t *Task) bool {
	if svc == nil || !t.Status.State.Terminal() || !t.Desired.Stopping() {
		return false
	}
	sl := svc.slots.get(t.Slot)
	if sl == nil || len(sl.tasks()) <= s.settings.TaskHistoryLimit {
		return false
	}
	for _, x := range sl.tasks() {
		if x.Status.State.Terminal() && x.Desired.Stopping() {
			return x == t
		}
	}
	return false
}

// Reapable reports whether the reaper may delete the task now.
func (s *State) Reapable(id TaskID) bool {
	t := s.tasks.get(id)
	return t != nil && (s.reapable(t) || s.beyondRetention(s.services[t.Service], t))
}
