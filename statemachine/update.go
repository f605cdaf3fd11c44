package statemachine

import (
	"fmt"
	"math"
)

// Rolling updates (SwarmKit semantics). A spec change bumps the service's
// spec version and starts an update: slots are moved to the new version
// `Parallelism` at a time (0: all at once). A slot is in flight from the
// moment its update starts until its new task has run for `Delay`, or until
// `Delay` has passed since the new task's failure was counted; only then
// does its worker take the next slot, so a failure that trips the failure
// action acts before any other slot starts. A new-version task that fails
// before running or within `Monitor` of starting counts as a failure; when
// failures exceed MaxFailureRatio of the slots updated so far, the
// FailureAction decides: pause, continue, or roll back to the previous spec.
// A rollback is an update too, moved by the Rollback configuration of the
// spec it rolls back from (the one the user declared last, whose failure
// action may have asked for the rollback) instead of Update; a failing
// rollback pauses or, with failure action continue, goes on; it is never
// rolled back again. Order start-first starts the new
// task before stopping the old one. Apply's zero values mean: all at once,
// no delay, no monitor, pause on any failure, stop-first; the API fills in
// SwarmKit's defaults where the user left a field out.

// UpdateOrder is the order of stopping the old and starting the new task.
type UpdateOrder uint8

// Update orders.
const (
	StopFirst UpdateOrder = iota
	StartFirst
)

func (o UpdateOrder) String() string {
	if o == StartFirst {
		return "start-first"
	}
	return "stop-first"
}

// FailureAction is what an update does when too many new tasks fail.
type FailureAction uint8

// Failure actions (default pause).
const (
	ActionPause FailureAction = iota
	ActionContinue
	ActionRollback
	numFailureActions
)

var actionNames = [...]string{"pause", "continue", "rollback"}

func (a FailureAction) String() string {
	if a < numFailureActions {
		return actionNames[a]
	}
	return fmt.Sprintf("FailureAction(%d)", uint8(a))
}

// UpdateConfig says how a service's tasks move to a new spec.
type UpdateConfig struct {
	Parallelism     uint32        // slots updated at once; 0 = all
	Delay           int64         // ns a worker waits after a slot's new task runs
	FailureAction   FailureAction // default pause
	Monitor         int64         // ns after a task starts during which its failure counts
	MaxFailureRatio float64       // failures tolerated, as a fraction of updated slots
	Order           UpdateOrder   // default stop-first
}

// valid reports whether the durations are not negative and the ratio is a
// fraction (the failure action is checked by the caller: a rollback's may
// not be rollback).
func (u UpdateConfig) valid() bool {
	return u.Delay >= 0 && u.Monitor >= 0 && u.Order <= StartFirst &&
		!math.IsNaN(u.MaxFailureRatio) && u.MaxFailureRatio >= 0 && u.MaxFailureRatio <= 1
}

// updateConfig is the configuration svc's update moves by: its spec's
// Update, or during a rollback the Rollback of the spec rolled back from
// (PrevSpec, since a rollback swaps the two).
func (svc *Service) updateConfig() UpdateConfig {
	if (svc.Update.State == RollbackStarted || svc.Update.State == RollbackPaused) && svc.PrevSpec != nil {
		return svc.PrevSpec.Rollback
	}
	return svc.Spec.Update
}

// UpdateState is where a service's update stands.
type UpdateState uint8

// Update states.
const (
	UpdateNone UpdateState = iota
	Updating
	UpdatePaused
	UpdateCompleted
	RollbackStarted
	RollbackPaused
	RollbackCompleted
	numUpdateStates
)

var updateStateNames = [...]string{"", "updating", "paused", "completed", "rollback_started", "rollback_paused", "rollback_completed"}

func (u UpdateState) String() string {
	if u < numUpdateStates {
		return updateStateNames[u]
	}
	return fmt.Sprintf("UpdateState(%d)", uint8(u))
}

// UpdateStatus is the progress of a service's last update.
type UpdateStatus struct {
	State       UpdateState
	StartedAt   int64
	CompletedAt int64
	Message     string
	Failures    uint32
}

func (u UpdateStatus) active() bool { return u.State == Updating || u.State == RollbackStarted }

// beginUpdate records that svc moved to a new spec version.
func (s *State) beginUpdate(svc *Service, rollback bool) {
	st := Updating
	if rollback {
		st = RollbackStarted
	}
	svc.Update = UpdateStatus{State: st, StartedAt: s.now}
	s.updating[svc.ID] = svc
}

// rollbackService is the user's manual rollback to the previous spec.
func (s *State) rollbackService(name string) Result {
	svc := s.ServiceByName(name)
	if svc == nil {
		return reject(CodeNotFound, "service %q does not exist", name)
	}
	if svc.Remove {
		return reject(CodeNotAllowed, "service %q is being removed", name)
	}
	if svc.PrevSpec == nil {
		return reject(CodeNotAllowed, "service %q has no previous spec to roll back to", name)
	}
	s.rollback(svc, "manually requested rollback")
	svc.ModifyIndex = s.index
	s.emit(Effect{Kind: EffServiceChanged, Service: svc.ID})
	return Result{ID: uint64(svc.ID)}
}

func (s *State) rollback(svc *Service, why string) {
	prev := *svc.PrevSpec
	cur := svc.Spec
	svc.Spec, svc.PrevSpec = prev, &cur
	s.requeueUnknown(svc, cur.Disconnect)
	svc.SpecVersion++
	s.recountRunning(svc)
	s.beginUpdate(svc, true)
	svc.Update.Message = why
	s.markDirty(svc)
}

// countFailure notes that a task of the current version failed; it may
// pause or roll back the update.
func (s *State) countFailure(svc *Service, t *Task) {
	if !svc.Update.active() || t.SpecVersion != svc.SpecVersion {
		return
	}
	u := svc.updateConfig()
	if started := runningSince(t); started != math.MaxInt64 && s.now-started >= u.Monitor {
		return // it ran past the monitor window: not the update's fault
	}
	svc.Update.Failures++
	updated := 0
	for _, sl := range svc.slots.all() {
		if !removedSlot(sl) && sl.tasks()[len(sl.tasks())-1].SpecVersion == svc.SpecVersion {
			updated++
		}
	}
	if float64(svc.Update.Failures) <= u.MaxFailureRatio*float64(max(updated, 1)) {
		return
	}
	why := fmt.Sprintf("update paused due to failure of task %d (%s)", t.ID, t.Status.State)
	switch {
	case svc.Update.State == RollbackStarted:
		if u.FailureAction != ActionContinue {
			svc.Update.State, svc.Update.Message = RollbackPaused, "rollback paused due to failure of task "+fmt.Sprint(t.ID)
			delete(s.updating, svc.ID)
		}
	case u.FailureAction == ActionRollback:
		s.rollback(svc, fmt.Sprintf("rollback started due to failure of task %d", t.ID))
	case u.FailureAction == ActionPause:
		svc.Update.State, svc.Update.Message = UpdatePaused, why
		delete(s.updating, svc.ID)
	}
}

// stepUpdate advances svc's rolling update: it completes the update when
// every slot has moved and settled, and returns how many more slots may
// start moving to the current spec version now (-1: no limit). The counts
// come from the kept walk (keptwalk.go), which costs the slots that changed
// or whose time came; walkSlot says how a slot counts.
func (s *State) stepUpdate(svc *Service) int {
	u := svc.updateConfig()
	switch svc.Update.State {
	case UpdatePaused, RollbackPaused:
		return 0
	case Updating, RollbackStarted:
	default:
		return -1
	}
	var inflight, outdated, unsettled int
	if s.walkAll {
		inflight, outdated, unsettled = s.walkUpdate(svc, u)
	} else {
		inflight, outdated, unsettled = s.keptWalk(svc, u)
	}
	if outdated == 0 && inflight == 0 && unsettled == 0 {
		if svc.Update.State == RollbackStarted {
			svc.Update.State = RollbackCompleted
		} else {
			svc.Update.State = UpdateCompleted
		}
		svc.Update.CompletedAt = s.now
		delete(s.updating, svc.ID)
		return -1
	}
	if u.Parallelism == 0 {
		return -1
	}
	return max(int(u.Parallelism)-inflight, 0)
}

// walkUpdate counts svc's slots in flight, outdated and unsettled by
// walking every slot, noting when the counts may change next: what the
// kept walk (keptWalk) must equal, and what a state built with walkAll
// runs.
func (s *State) walkUpdate(svc *Service, u UpdateConfig) (inflight, outdated, unsettled int) {
	for _, n := range svc.slotKeys() {
		w := s.walkSlot(svc, svc.slots.get(n), u)
		inflight, unsettled = inflight+int(w.inflight), unsettled+int(w.unsettled)
		if w.outdated {
			outdated++
		}
		if w.note != 0 {
			s.noteDue(w.note)
		}
		if w.noteNow {
			s.noteDue(s.now + u.Delay)
		}
	}
	return inflight, outdated, unsettled
}

// slotWalk is one slot's part of its service's rolling update walk, as of
// a time: how it counts, the least due time it notes (0: none), whether it
// notes "now + delay", and until when it holds (0: until the slot or the
// service changes; else until the time the earliest of its time tests
// flips, which is a due time it notes).
type slotWalk struct {
	gen                 uint64 // the service's walk generation (0: none)
	inflight, unsettled int32
	outdated, noteNow   bool
	old                 bool // it holds a live task of an older spec version
	stale               bool // listed in the walk's stale slots
	note, until         int64
}

// walkSlot is one slot's part of the walk at s.now.
//
// A slot is in flight from the moment its update starts until its new task
// has run for the delay, or until the delay has passed since the new task's
// failure was counted: a failure that trips the failure action pauses or
// rolls back before another slot starts, and with action continue the next
// slot waits for the delay after the failure, as after a success. A failed
// task whose failure this pass is about to count holds its slot in flight,
// since the budget is computed before the slots are reconciled. Once a
// slot's new task failed, the restart policy's replacements for it do not
// hold the update (SwarmKit's updater leaves them to the restart
// supervisor), unless the slot's old task still runs (start-first): then the
// update moves the slot again and its new task is in flight.
func (s *State) walkSlot(svc *Service, sl *slot, u UpdateConfig) slotWalk {
	var w slotWalk
	note := func(at int64) {
		if w.note == 0 || at < w.note {
			w.note = at
		}
		if at > s.now && (w.until == 0 || at < w.until) {
			w.until = at
		}
	}
	settle := max(u.Delay, u.Monitor)
	// A slot's tasks come oldest first, so its older versions' tasks
	// come before the current version's.
	var old, cur, failed bool
	for _, t := range sl.tasks() {
		if t.SpecVersion < svc.SpecVersion {
			old = old || !t.Desired.Stopping() && !t.Status.State.Terminal()
			continue
		}
		since := runningSince(t)
		switch {
		case t.Desired.Stopping() && t.StopReason != StopFailed:
		case t.Desired.Stopping() || !s.runnable(t):
			// Failed: counted when it was flagged to stop, or in this
			// pass. It holds its slot for the delay after that, unless
			// it had run for the delay before.
			failed = true
			if !t.Desired.Stopping() {
				w.inflight++ // counted in this pass: no slot starts before
				w.noteNow = true
				break
			}
			if at := stoppedAt(t); s.now < at+u.Delay && (since == math.MaxInt64 || at-since < u.Delay) {
				w.inflight++
				note(at + u.Delay)
			}
		case failed && !old:
			// a replacement for the failed task, by the restart policy
		default:
			cur = true
			switch {
			case t.Status.State != StateRunning || since == math.MaxInt64 || s.now-since < u.Delay:
				w.inflight++
				if since != math.MaxInt64 {
					note(since + u.Delay)
				}
			case s.now-since < settle:
				w.unsettled++
				note(since + settle)
			}
		}
	}
	w.old, w.outdated = old, old && !cur
	return w
}

// stoppedAt is when t was flagged to stop: its last desired-state change to
// a stopping state, or failing that (its history dropped the entry) when its
// status last changed.
func stoppedAt(t *Task) int64 {
	for i := t.History.Len() - 1; i >= 0; i-- {
		if e := t.History.At(i); e.Kind == HistDesired && e.Desired.Stopping() {
			return e.At
		}
	}
	return t.Status.Timestamp
}
