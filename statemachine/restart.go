package statemachine

import "slices"

// Restart policy over time (SwarmKit semantics): a dead task in a live slot
// is replaced when its restart condition says so and the slot has attempts
// left (MaxAttempts per slot and spec version, counted over Window); the
// replacement is created at once but held at desired state `ready` until
// Delay has passed and the old task has stopped, or oldTaskTimeout has passed
// since it was created, whichever comes first once the delay is over. An old
// task whose node is gone for it (down, removed, or disconnected while the
// task has no disconnect window or was lost) is not waited for: nobody can
// report it stopped until its node is back (SwarmKit's restart supervisor
// skips the wait when the node is down), and its addresses stay held until
// its node confirms it gone, so the replacement may start at once.

// oldTaskTimeout bounds how long a delayed replacement waits for the task it
// replaces to stop (SwarmKit's one minute).
const oldTaskTimeout = int64(60e9)

// restartRecord remembers when a slot's task was last restarted, for the
// current spec version only.
type restartRecord struct {
	SpecVersion uint32
	Times       []int64 // unix nanoseconds, oldest first
}

// maxRestartTimes bounds a record when MaxAttempts is unlimited.
const maxRestartTimes = 16

// attemptsLeft reports whether slot n of svc may be restarted again now.
func (s *State) attemptsLeft(svc *Service, n uint32) bool {
	p := svc.Spec.Restart
	if p.MaxAttempts == 0 {
		return true
	}
	rec := svc.restarts[n]
	if rec == nil || rec.SpecVersion != svc.SpecVersion {
		return true
	}
	used := 0
	for _, at := range rec.Times {
		if p.Window == 0 || s.now-at < p.Window {
			used++
		}
	}
	return used < int(p.MaxAttempts)
}

// recordRestart counts one restart of slot n now.
func (s *State) recordRestart(svc *Service, n uint32) {
	if svc.restarts == nil {
		svc.restarts = make(map[uint32]*restartRecord)
	}
	rec := svc.restarts[n]
	if rec == nil || rec.SpecVersion != svc.SpecVersion {
		rec = &restartRecord{SpecVersion: svc.SpecVersion}
		svc.restarts[n] = rec
	}
	rec.Times = append(rec.Times, s.now)
	keep := maxRestartTimes
	if m := int(svc.Spec.Restart.MaxAttempts); m > 0 {
		keep = m
	}
	if w := svc.Spec.Restart.Window; w > 0 {
		i := 0
		for i < len(rec.Times) && s.now-rec.Times[i] >= w {
			i++
		}
		rec.Times = rec.Times[i:]
	}
	if len(rec.Times) > keep {
		rec.Times = rec.Times[len(rec.Times)-keep:]
	}
}

// delayStart holds a just-created replacement at desired `ready` until its
// restart delay has passed.
func (s *State) delayStart(t *Task, delay int64) {
	if delay <= 0 {
		return
	}
	s.holdAtReady(t, delay)
}

// holdAtReady creates t at desired `ready`: it starts once delay has passed
// and the other tasks of its slot have stopped or are on a node gone for
// them, or oldTaskTimeout after now.
func (s *State) holdAtReady(t *Task, delay int64) {
	s.keepTask(t)
	s.touchTask(t)
	t.Desired = DesiredReady
	startAt := s.now + delay
	t.setHold(startAt, max(startAt, s.now+oldTaskTimeout), t.AfterReject())
	t.History.setFirstDesired(DesiredReady)
	s.delayed[t.ID] = t
	s.delayedDue.push(startAt, t.ID)
	s.noteDue(startAt)
}

// delayedFacts reports, from replicated facts alone, whether t belongs in
// the delayed index: held at desired ready until its start time. (The live
// index may also hold tasks stopped meanwhile, dropped lazily.)
func delayedFacts(t *Task, _ *Node) bool {
	return t.Desired == DesiredReady && t.StartAt() != 0
}

// promotable reports whether a delayed task may start now: its delay has
// passed and every other task of its slot has stopped or is on a node gone
// for it (onDownNode), or it has waited oldTaskTimeout. A node that goes
// down, or a window that passes, while t waits marks t's slot, and
// reconcileSlot looks at t again (maybePromote).
func (s *State) promotable(t *Task) bool {
	if s.now < t.StartAt() {
		return false
	}
	if s.now >= t.StartBy() {
		return true
	}
	svc := s.services[t.Service]
	if svc == nil {
		return false
	}
	if sl := svc.slots.get(t.Slot); sl != nil {
		for _, x := range sl.tasks() {
			if x != t && !x.Status.State.Terminal() && !s.onDownNode(x) {
				return false
			}
		}
	}
	return true
}

// promoteDue starts the delayed replacements whose time has come, in ID
// order: a task whose delay passed with its slot still busy is looked at
// again when it starts anyway (a slot that frees promotes it at once,
// maybePromote).
func (s *State) promoteDue() {
	due := s.delayedDue.popDue(s.now)
	slices.Sort(due)
	for _, id := range slices.Compact(due) {
		t := s.delayed[id]
		switch {
		case t == nil: // promoted or deleted meanwhile
		case t.Desired != DesiredReady:
			delete(s.delayed, id) // stopped meanwhile
		case s.promotable(t):
			delete(s.delayed, id)
			s.setDesired(t, DesiredRunning)
		case s.now < t.StartAt():
			s.delayedDue.push(t.StartAt(), id)
		default:
			s.delayedDue.push(t.StartBy(), id)
		}
	}
	// The next due time counts held tasks only, as a state restored from
	// a snapshot (whose index holds no task stopped meanwhile) counts
	// them: nextDue is replicated.
	held := func(id TaskID) bool {
		t := s.delayed[id]
		if t != nil && t.Desired != DesiredReady {
			delete(s.delayed, id) // stopped meanwhile
			return false
		}
		return t != nil
	}
	if at, ok := s.delayedDue.next(held); ok {
		s.noteDue(at)
	}
}

// maybePromote starts a delayed task at once if it may (its slot changed).
func (s *State) maybePromote(t *Task) {
	if t.Desired == DesiredReady && t.StartAt() != 0 && s.promotable(t) {
		delete(s.delayed, t.ID)
		s.setDesired(t, DesiredRunning)
	}
}
