package statemachine

// Settled counts service id's slots that need nothing more at its current
// spec version: a task runs there at that version as it should, or the
// slot's newest task ended there for good (its restart condition, or its
// restart attempts used up, leave it ended; a slot being scaled away does
// not count). Failed counts those of them whose task failed or was
// rejected. Tasks of older versions and a slot's earlier tasks never
// count: after an update, the new version settles the slot.
//
// Where no ended task can be final (restart condition any, unlimited
// attempts) it reads the kept counts; otherwise it walks the service's
// slots.
func (s *State) Settled(id ServiceID) (settled, failed int) {
	svc := s.services[id]
	if svc == nil {
		return 0, 0
	}
	if svc.Spec.Restart.Condition == RestartAny && svc.Spec.Restart.MaxAttempts == 0 {
		return svc.counts.Running, 0
	}
	for n, sl := range svc.slots.all() {
		if len(sl.tasks()) == 0 {
			continue
		}
		running := false
		for _, t := range sl.tasks() {
			running = running || runningCounted(t, svc)
		}
		if running {
			settled++
			continue
		}
		t := sl.tasks()[len(sl.tasks())-1]
		if t.SpecVersion != svc.SpecVersion || t.Desired == DesiredRemove {
			continue
		}
		switch st := t.Status.State; st {
		case StateComplete, StateFailed, StateRejected:
			if s.shouldRestart(svc, t) && s.attemptsLeft(svc, n) {
				continue
			}
			settled++
			if st != StateComplete {
				failed++
			}
		}
	}
	return settled, failed
}
