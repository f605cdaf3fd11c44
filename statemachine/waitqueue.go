package statemachine

import (
	"container/heap"
	"fmt"
	"slices"
)

// Tasks waiting for addresses are queued by service. All the waiting
// tasks of a service need addresses on the same networks (its current
// spec's), and within one pass nothing is released, so once one of them
// is refused the rest of that service would be refused too: a pass tries
// each service's tasks in ID order until the first refusal, merging the
// services by their next task's ID so that the oldest task is still
// served first. A pass that went over every waiting task (with a hundred
// thousand waiting in a group, at every block grant) was more than half
// of every replica's CPU in a million-task ramp.

// A task waits for addresses exactly while it is new (invariant checked
// by checkWaitQueues), so the queues hold IDs and a queued ID is waiting
// while the store holds a new task of that ID: no index of every waiting
// task. A map of them, probed twice per task a pass served and written at
// every create and allocation, was a quarter of the pass in a
// million-task ramp (a hundred thousand waiting in a group) and held MBs.

// waitingTask returns the task id if it waits for addresses, else nil.
func (s *State) waitingTask(id TaskID) *Task {
	if t := s.tasks.get(id); t != nil && t.Status.State == StateNew {
		return t
	}
	return nil
}

// waitingIDs lists the queued waiting tasks' IDs in increasing order.
func (s *State) waitingIDs() []TaskID {
	var ids []TaskID
	for _, svc := range s.services {
		for _, id := range svc.waitQ {
			if s.waitingTask(id) != nil {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// addWaiting queues new task t, just stored, as waiting for addresses.
func (s *State) addWaiting(t *Task) {
	s.nWaiting++
	svc := s.services[t.Service]
	if svc == nil {
		return
	}
	svc.waitN++
	s.waitSvcs[svc.ID] = struct{}{}
	s.noteWaitMsg(t)
	if s.fullNets == nil {
		// Never during a pass, whose cursors hold queue positions.
		svc.waitQ.compact(svc.waitN, func(id TaskID) bool { return s.waitingTask(id) == nil })
	}
	svc.waitQ.add(t.ID)
}

// unwait counts t out of the tasks waiting for addresses if it is new:
// it is about to leave new or the store (its queue entry is dropped when
// met).
func (s *State) unwait(t *Task) {
	if t.Status.State != StateNew {
		return
	}
	s.nWaiting--
	if svc := s.services[t.Service]; svc != nil {
		svc.waitN--
	}
}

// waitCursor is a service's place in a pass: waitQ[pos] is its next
// task, t (found by next).
type waitCursor struct {
	svc *Service
	pos int
	t   *Task
}

// waitHeap orders the services of a pass by their next task's ID.
type waitHeap []waitCursor

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].svc.waitQ[h[i].pos] < h[j].svc.waitQ[h[j].pos] }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waitCursor)) }
func (h *waitHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// next moves c to its service's next task that is waiting and wanted,
// dropping from the front of the queue the IDs that left waiting; it
// reports false at the end of the queue. Tasks being stopped stay
// queued (the reaper deletes them) but are not given addresses.
func (s *State) next(c *waitCursor) bool {
	q := c.svc.waitQ
	for c.pos < len(q) {
		t := s.waitingTask(q[c.pos])
		switch {
		case t == nil:
			if c.pos == 0 {
				q = q[1:]
				c.svc.waitQ = q
				continue
			}
		case !t.Desired.Stopping():
			c.t = t
			return true
		}
		c.pos++
	}
	return false
}

// retryAllocation moves tasks that waited for addresses to pending, oldest
// first, once addresses were freed.
func (s *State) retryAllocation() {
	if s.cfg.ManualReactions {
		return
	}
	// Within one pass nothing is released, so a network found full stays
	// full: later tasks on it get the same answer without another attempt.
	s.fullNets = map[string]error{}
	h := s.waitPass[:0]
	for _, id := range sortedKeys(s.waitSvcs) {
		svc := s.services[id]
		if svc == nil || svc.waitN == 0 {
			delete(s.waitSvcs, id)
			if svc != nil {
				svc.waitQ = nil
			}
			continue
		}
		c := waitCursor{svc: svc}
		if s.next(&c) {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		c := &h[0]
		t := c.t
		s.allocateTask(t)
		if t.Status.State == StateNew {
			// Refused: so would the service's later tasks be. Their
			// messages say so too (walked only when one of them may say
			// something else).
			if svc := c.svc; svc.waitMixed || t.Message() != svc.waitMsg {
				s.tellWaiting(svc, c.pos+1, t.Message())
				svc.waitMsg, svc.waitMixed = t.Message(), false
			}
			heap.Pop(&h)
			continue
		}
		// It left waiting: next steps over it (dropping it from the
		// front of the queue when it is there).
		if s.next(c) {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	clear(h[:cap(h)])
	s.waitPass = h[:0]
	s.fullNets = nil
}

// noteWaitMsg records that waiting task t says what it says: its service's
// waiting tasks may no longer all say the same. A task not tried yet says
// nothing and is left out (a new task is tried in the batch that made it:
// noting it would make every pass of a ramp walk every queue).
func (s *State) noteWaitMsg(t *Task) {
	if svc := s.services[t.Service]; svc != nil && t.Message() != "" && t.Message() != svc.waitMsg && !t.Desired.Stopping() {
		svc.waitMixed = true
	}
}

// tellWaiting gives msg to svc's waiting, wanted tasks from queue position
// pos on.
func (s *State) tellWaiting(svc *Service, pos int, msg string) {
	for _, id := range svc.waitQ[pos:] {
		if t := s.waitingTask(id); t != nil && !t.Desired.Stopping() {
			s.keepTask(t)
			t.setMessage(msg, &s.lastMsg)
		}
	}
}

// checkWaitQueues checks the waiting tasks against the services' queues:
// every new task of the store is listed once in its service's queue,
// which is in increasing order, and counted; each service counts its
// waiting tasks and is listed in waitSvcs while it has any.
func (s *State) checkWaitQueues() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	queued := make(map[TaskID]bool, s.nWaiting)
	for _, id := range sortedKeys(s.services) {
		svc := s.services[id]
		n := 0
		for i, tid := range svc.waitQ {
			if i > 0 && svc.waitQ[i-1] >= tid {
				bad("service %d's waiting queue lists task %d after task %d", id, tid, svc.waitQ[i-1])
			}
			t := s.waitingTask(tid)
			if t == nil {
				continue
			}
			if t.Service != id {
				bad("task %d of service %d is queued as waiting in service %d", tid, t.Service, id)
			}
			if !svc.waitMixed && !t.Desired.Stopping() && t.Message() != "" && t.Message() != svc.waitMsg {
				bad("service %d's waiting task %d says %q, not what its service's waiting tasks say (%q)", id, tid, t.Message(), svc.waitMsg)
			}
			queued[tid] = true
			n++
		}
		if n != svc.waitN {
			bad("service %d counts %d tasks waiting for addresses, its queue has %d", id, svc.waitN, n)
		}
		if _, listed := s.waitSvcs[id]; n > 0 && !listed {
			bad("service %d has tasks waiting for addresses but is not listed as waiting", id)
		}
	}
	n := 0
	for id, t := range s.tasks.all() {
		if t.Status.State != StateNew {
			continue
		}
		n++
		if !queued[id] {
			bad("task %d waits for addresses but is missing from its service's queue", id)
		}
	}
	if n != s.nWaiting {
		bad("%d tasks are counted as waiting for addresses, %d are new", s.nWaiting, n)
	}
	return errs
}
