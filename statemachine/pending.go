package statemachine

import (
	"fmt"
	"time"
)

// Why pending tasks stay pending. The scheduler runs on the cluster
// group's leader, outside the replicated state; what it could not place it
// explains with CmdPendingReason, so the reason is replicated with the
// task (its Status.Message) and every manager shows it. The scheduler sends
// a reason only when it differs from what the tasks carry, so an unchanged
// reason costs nothing per scheduling pass; assigning a task clears it.

// maxReasonLen bounds a pending reason, as a user's input is bounded.
const maxReasonLen = 1024

// pendingReason sets the message of the pending tasks of one spec version
// of a service (c.Tasks of them only, when given) that are still wanted.
// Tasks that are gone or no longer pending are skipped: the reason was
// about a placement attempt they are past.
func (s *State) pendingReason(c *Command) Result {
	svc := s.ServiceByName(c.Name)
	if svc == nil {
		return reject(CodeNotFound, "service %q does not exist", c.Name)
	}
	if len(c.Message) > maxReasonLen {
		return reject(CodeInvalid, "a pending reason has at most %d bytes", maxReasonLen)
	}
	set := func(t *Task) {
		if t == nil || t.Service != svc.ID || t.Status.State != StatePending || t.Desired.Stopping() ||
			uint64(t.SpecVersion) != c.Seq || t.Message() == c.Message {
			return
		}
		s.keepTask(t)
		t.setMessage(c.Message, &s.lastMsg)
		s.emit(Effect{Kind: EffTaskState, Task: t.ID, Service: t.Service})
	}
	if len(c.Tasks) > 0 {
		for _, id := range c.Tasks {
			set(s.tasks.get(id))
		}
		return Result{ID: uint64(svc.ID)}
	}
	for _, n := range svc.slotKeys() {
		for _, t := range svc.slots.get(n).tasks() {
			set(t)
		}
	}
	return Result{ID: uint64(svc.ID)}
}

// waitingPrefix starts the allocator's message for a task waiting for an
// address; the allocator clears only its own message.
const waitingPrefix = "waiting for an address: "

// rejectedMessage is what the replacement of a rejected task says while it
// waits for its restart delay before it may be placed.
func rejectedMessage(svc *Service, rejected *Task) string {
	why := ""
	if m := rejected.Message(); m != "" {
		why = ": " + m
	}
	return fmt.Sprintf("held for the restart delay (%s) because the task before it was rejected%s",
		time.Duration(svc.Spec.Restart.Delay), why)
}

// allocationMessage says why a task waits for an address; equal messages
// share the last one's string.
func (s *State) allocationMessage(err error) string {
	e := err.Error()
	if m := s.lastWaitMsg; len(m) == len(waitingPrefix)+len(e) && m[len(waitingPrefix):] == e {
		return m
	}
	s.lastWaitMsg = waitingPrefix + e
	return s.lastWaitMsg
}
