package statemachine

import (
	"container/heap"
	"fmt"
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

// addWaiting indexes t as waiting for addresses, in its service's queue.
func (s *State) addWaiting(t *Task) {
	if s.waiting[t.ID] != nil {
		return
	}
	s.waiting[t.ID] = t
	s.waitPeak = max(s.waitPeak, len(s.waiting))
	svc := s.services[t.Service]
	if svc == nil {
		return
	}
	svc.waitN++
	s.waitSvcs[svc.ID] = struct{}{}
	s.noteWaitMsg(t)
	if s.fullNets == nil {
		// Never during a pass, whose cursors hold queue positions.
		svc.waitQ.compact(svc.waitN, func(id TaskID) bool { return s.waiting[id] == nil })
	}
	svc.waitQ.add(t.ID)
}

// unwait drops t from the tasks waiting for addresses (its queue entry is
// dropped when met).
func (s *State) unwait(t *Task) {
	if s.waiting[t.ID] == nil {
		return
	}
	delete(s.waiting, t.ID)
	if svc := s.services[t.Service]; svc != nil {
		svc.waitN--
	}
	if len(s.waiting) == 0 && s.waitPeak > 1024 {
		// A map keeps its room when emptied: a ramp's hundred thousand
		// waiting tasks left MBs behind in every group.
		s.waiting, s.waitPeak = make(map[TaskID]*Task), 0
	}
}

// waitCursor is a service's place in a pass: waitQ[pos] is its next task.
type waitCursor struct {
	svc *Service
	pos int
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
		t := s.waiting[q[c.pos]]
		switch {
		case t == nil:
			if c.pos == 0 {
				q = q[1:]
				c.svc.waitQ = q
				continue
			}
		case !t.Desired.Stopping():
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
		t := s.waiting[c.svc.waitQ[c.pos]]
		s.allocateTask(t)
		if t.Status.State == StateNew {
			// Refused: so would the service's later tasks be. Their
			// messages say so too (walked only when one of them may say
			// something else).
			if svc := c.svc; svc.waitMixed || t.Status.Message != svc.waitMsg {
				s.tellWaiting(svc, c.pos+1, t.Status.Message)
				svc.waitMsg, svc.waitMixed = t.Status.Message, false
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
	if svc := s.services[t.Service]; svc != nil && t.Status.Message != "" && t.Status.Message != svc.waitMsg && !t.Desired.Stopping() {
		svc.waitMixed = true
	}
}

// tellWaiting gives msg to svc's waiting, wanted tasks from queue position
// pos on.
func (s *State) tellWaiting(svc *Service, pos int, msg string) {
	for _, id := range svc.waitQ[pos:] {
		if t := s.waiting[id]; t != nil && !t.Desired.Stopping() {
			t.Status.Message = msg
		}
	}
}

// checkWaitQueues checks the waiting index against the services' queues:
// every waiting task is a new task of the store, listed once in its
// service's queue, which is in increasing order; each service counts its
// waiting tasks and is listed in waitSvcs while it has any.
func (s *State) checkWaitQueues() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	queued := make(map[TaskID]bool, len(s.waiting))
	for _, id := range sortedKeys(s.services) {
		svc := s.services[id]
		n := 0
		for i, tid := range svc.waitQ {
			if i > 0 && svc.waitQ[i-1] >= tid {
				bad("service %d's waiting queue lists task %d after task %d", id, tid, svc.waitQ[i-1])
			}
			t := s.waiting[tid]
			if t == nil {
				continue
			}
			if t.Service != id {
				bad("task %d of service %d is queued as waiting in service %d", tid, t.Service, id)
			}
			if !svc.waitMixed && !t.Desired.Stopping() && t.Status.Message != "" && t.Status.Message != svc.waitMsg {
				bad("service %d's waiting task %d says %q, not what its service's waiting tasks say (%q)", id, tid, t.Status.Message, svc.waitMsg)
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
	for _, id := range sortedKeys(s.waiting) {
		t := s.waiting[id]
		if !queued[id] {
			bad("task %d waits for addresses but is missing from its service's queue", id)
		}
		if s.tasks.get(id) != t || t.Status.State != StateNew {
			bad("task %d is indexed as waiting but is not a new task of the store", id)
		}
	}
	return errs
}
