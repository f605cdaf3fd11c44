package statemachine

import "strings"

// CanTransition reports whether component c may move a task's observed
// state from `from` to `to` (DESIGN.md's ownership table). Agent reports may
// be coalesced: any target reachable from `from` through agent transitions
// alone is allowed.
func CanTransition(c Component, from, to TaskState) bool {
	if !from.Valid() || !to.Valid() || to <= from {
		return false
	}
	switch c {
	case CompAllocator:
		return from == StateNew && to == StatePending
	case CompScheduler:
		return from == StatePending && to == StateAssigned
	case CompAgent:
		if from < StateAssigned || from > StateRunning {
			return false
		}
		switch to {
		case StateAccepted, StatePreparing, StateReady, StateStarting, StateRunning,
			StateComplete, StateFailed, StateShutdown:
			return true
		case StateRejected:
			return from <= StateStarting
		}
		return false
	case CompNodeMonitor:
		return from >= StateAssigned && from <= StateRunning && to == StateOrphaned
	}
	return false
}

// transition moves t to state `to` on behalf of component by, recording it.
func (s *State) transition(t *Task, to TaskState, by Component) {
	if s.observe != nil {
		s.observe.transition(t, t.Status.State, to, by)
	}
	if t.Status.State == StateNew {
		s.unwait(t)
	}
	s.keepTask(t)
	s.touchTask(t)
	s.countTask(t, -1)
	t.Status.State = to
	t.Status.Timestamp = s.now
	// Counted again after the entry: the ring may drop the task's oldest
	// entry, its connectivity marker with it (runningAny reads it).
	t.History.add(HistoryEntry{At: s.now, State: to, Kind: HistTransition, By: by, Desired: t.Desired})
	s.countTask(t, 1)
	s.emit(Effect{Kind: EffTaskState, Node: t.Node, Task: t.ID, Service: t.Service})
	if to.Terminal() {
		s.releaseAddresses(t)
		s.markSlot(s.services[t.Service], t.Slot)
	} else if to == StateRunning && len(s.updating) > 0 {
		if svc := s.updating[t.Service]; svc != nil {
			s.markSlot(svc, t.Slot) // a rolling update times its next step from here
		}
	}
}

// setDesired raises t's desired state (never lowers it, except ready →
// running). It reports whether anything changed.
func (s *State) setDesired(t *Task, d DesiredState) bool {
	if d == t.Desired || (d < t.Desired && !(t.Desired == DesiredReady && d == DesiredRunning)) {
		return false
	}
	if s.observe != nil {
		s.observe.desired(t, t.Desired, d)
	}
	s.keepTask(t)
	s.touchTask(t)
	s.countTask(t, -1)
	if d.Stopping() && !t.Desired.Stopping() {
		s.countLive(t, -1)
	}
	t.Desired = d
	t.History.add(HistoryEntry{At: s.now, State: t.Status.State, Kind: HistDesired, By: CompOrchestrator, Desired: d})
	s.countTask(t, 1)
	if t.Node != 0 {
		s.nodeChanged(t, EffAssignments)
	} else {
		s.emit(Effect{Kind: EffTaskDesired, Task: t.ID, Service: t.Service})
	}
	return true
}

// assign is the scheduler's pending → assigned.
func (s *State) assign(id TaskID, node NodeID) Result {
	t := s.tasks.get(id)
	if t == nil {
		return reject(CodeNotFound, "task %d does not exist", id)
	}
	if t.Status.State != StatePending {
		return reject(CodeNotAllowed, "task %d is %s, not pending", id, t.Status.State)
	}
	if t.Desired.Stopping() {
		return reject(CodeNotAllowed, "task %d is wanted %s; not placing it", id, t.Desired)
	}
	n := s.nodes[node]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", node)
	}
	if n.Status != NodeReady || n.Availability != AvailActive {
		return reject(CodeNodeNotReady, "node %d is %s/%s; it takes no new tasks", node, n.Status, n.Availability)
	}
	if svc := s.services[t.Service]; svc != nil && svc.Spec.Mode == ModeGlobal && NodeID(t.Slot) != node {
		return reject(CodeWrongNode, "task %d of global service %q belongs on node %d, not %d",
			id, svc.Spec.Name, t.Slot, node)
	}
	s.attach(t, n)
	s.keepTask(t)
	t.setMessage("", nil) // it said why the task was not placed
	s.transition(t, StateAssigned, CompScheduler)
	s.nodeChanged(t, EffAssignments)
	return Result{ID: uint64(id)}
}

// agentStatus is an agent's report for a task on its own node.
func (s *State) agentStatus(c *Command) Result {
	t := s.tasks.get(c.Task)
	if t == nil {
		return reject(CodeNotFound, "task %d does not exist", c.Task)
	}
	if t.Node == 0 || t.Node != c.Node {
		return reject(CodeWrongNode, "task %d is on node %d, reported by node %d", c.Task, t.Node, c.Node)
	}
	n := s.nodes[c.Node]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", c.Node)
	}
	if !n.Status.AcceptsUpdates() {
		return reject(CodeNodeNotReady, "node %d is %s: heartbeat first, then report", c.Node, n.Status)
	}
	from := t.Status.State
	if c.State == from {
		return Result{ID: uint64(c.Task)} // a re-report: nothing new
	}
	if c.State < from {
		return reject(CodeLowerRank, "task %d is %s; cannot go back to %s", c.Task, from, c.State)
	}
	if !CanTransition(CompAgent, from, c.State) {
		return reject(CodeWrongComponent, "agent may not move task %d from %s to %s", c.Task, from, c.State)
	}
	if t.Desired == DesiredReady && (c.State == StateStarting || c.State == StateRunning) {
		return reject(CodeNotAllowed, "task %d is held at ready (restart delay or update); it may not start yet", c.Task)
	}
	s.keepTask(t)
	t.Status.ExitCode = c.ExitCode
	t.setMessage(c.Message, nil)
	s.transition(t, c.State, CompAgent)
	return Result{ID: uint64(c.Task)}
}

// orphan is the node monitor giving up on a task of a down node.
func (s *State) orphan(id TaskID) Result {
	t := s.tasks.get(id)
	if t == nil {
		return reject(CodeNotFound, "task %d does not exist", id)
	}
	n := s.nodes[t.Node]
	if n != nil && n.Status != NodeDown {
		return reject(CodeNotAllowed, "task %d: node %d is %s, not down", id, t.Node, n.Status)
	}
	if !CanTransition(CompNodeMonitor, t.Status.State, StateOrphaned) {
		return reject(CodeNotAllowed, "task %d is %s; only assigned..running tasks can be orphaned", id, t.Status.State)
	}
	s.transition(t, StateOrphaned, CompNodeMonitor)
	s.expireNode(t.Node) // past the orphan timeout its containers are gone
	return Result{ID: uint64(id)}
}

// orphanNode is the node monitor giving up on a down node: its orphan
// timeout passed, so its containers are gone. Every assigned..running task
// it has in this group is orphaned (in ID order) and every address it had
// quarantined is freed — also when it has no such task, e.g. when its only
// task was rejected and that task's address waits for a sync that will
// never come. Result.ID is the number of tasks orphaned. Applying it again
// changes nothing.
func (s *State) orphanNode(id NodeID) Result {
	n := s.nodes[id]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", id)
	}
	if n.Status != NodeDown {
		return reject(CodeNotAllowed, "node %d is %s, not down", id, n.Status)
	}
	orphaned := 0
	for _, t := range s.NodeTasks(id) {
		if CanTransition(CompNodeMonitor, t.Status.State, StateOrphaned) {
			s.transition(t, StateOrphaned, CompNodeMonitor)
			orphaned++
		}
	}
	s.expireNode(id)
	return Result{ID: uint64(orphaned)}
}

// allocate is the allocator's new → pending (explicit form).
func (s *State) allocate(id TaskID) Result {
	t := s.tasks.get(id)
	if t == nil {
		return reject(CodeNotFound, "task %d does not exist", id)
	}
	if t.Status.State != StateNew {
		return reject(CodeNotAllowed, "task %d is %s, not new", id, t.Status.State)
	}
	s.allocateTask(t)
	return Result{ID: uint64(id)}
}

func (s *State) allocateTask(t *Task) {
	if t.Desired.Stopping() {
		return // the reaper deletes it; no resources for a task nobody wants
	}
	if err := s.allocateAddresses(t); err != nil {
		s.keepTask(t)
		t.setMessage(s.allocationMessage(err), &s.lastMsg)
		s.noteWaitMsg(t)
		return // stays new; retried when addresses are freed
	}
	if strings.HasPrefix(t.Message(), waitingPrefix) {
		s.keepTask(t)
		t.setMessage("", nil)
	}
	s.transition(t, StatePending, CompAllocator)
	s.emit(Effect{Kind: EffPending, Task: t.ID, Service: t.Service})
}

// newTask creates a task in a slot (the orchestrator's only creation path).
func (s *State) newTask(svc *Service, slotNum uint32) *Task {
	s.nextTask++
	t := allocTask(len(svc.Spec.Networks), &Task{
		ID:          TaskID(uint64(s.cfg.Group)<<48 | s.nextTask),
		Service:     svc.ID,
		Slot:        slotNum,
		SpecVersion: svc.SpecVersion,
		Desired:     DesiredRunning,
		nodePos:     -1,
	})
	t.Status = TaskStatus{State: StateNew, Timestamp: s.now}
	t.History.add(HistoryEntry{At: s.now, State: StateNew, Kind: HistTransition, By: CompOrchestrator, Desired: DesiredRunning})
	s.tasks.set(t)
	s.addWaiting(t)
	if s.observe != nil {
		s.observe.created(t)
	}
	sl := svc.slots.get(slotNum)
	if sl == nil {
		sl = newSlot()
		svc.slots.set(slotNum, sl)
		svc.slotOrder = nil
	}
	sl.add(t)
	s.touchSlot(svc, slotNum)
	s.countTask(t, 1)
	s.countLive(t, 1)
	s.newTasks = append(s.newTasks, t)
	s.emit(Effect{Kind: EffTaskState, Task: t.ID, Service: t.Service})
	return t
}

// attach lists t on node n.
func (s *State) attach(t *Task, n *Node) {
	s.keepTask(t)
	s.touchTask(t)
	t.Node = n.ID
	t.nodePos = int32(len(n.tasks))
	n.tasks = append(n.tasks, t)
}

// detach removes t from its node's list (swap-remove).
func (s *State) detach(t *Task) {
	n := s.nodes[t.Node]
	if n == nil || t.nodePos < 0 {
		return
	}
	last := len(n.tasks) - 1
	moved := n.tasks[last]
	n.tasks[t.nodePos] = moved
	moved.nodePos = t.nodePos
	n.tasks[last] = nil
	n.tasks = n.tasks[:last]
	t.nodePos = -1
}

// deleteTask removes t from the store and every index. beyondRetention
// says the reaper deletes it as surplus history (else it is reapable).
func (s *State) deleteTask(t *Task, beyondRetention bool) {
	s.keepTask(t)
	if s.observe != nil {
		s.observe.deleted(t, beyondRetention)
	}
	s.unwait(t)
	if t.Status.State <= StatePending && len(t.Attachments) > 0 {
		// No node ever saw them: free at once, and tasks waiting for
		// addresses try again (a rolling update of unplaced tasks creates
		// the replacements before the reaper deletes the originals).
		s.freeAttachments(t.ID, t.Attachments)
		s.retryWaiting = true
	}
	delete(s.delayed, t.ID)
	delete(s.unknown, t.ID)
	s.countTask(t, -1)
	if !t.Desired.Stopping() {
		s.countLive(t, -1)
	}
	svc := s.services[t.Service]
	if svc != nil {
		s.touchSlot(svc, t.Slot)
		if sl := svc.slots.get(t.Slot); sl != nil {
			if i := indexOf(sl.tasks(), t); i >= 0 {
				sl.remove(i)
			}
			if len(sl.tasks()) == 0 {
				svc.slots.del(t.Slot)
				svc.walk.dropSlot(t.Slot)
				svc.slotOrder = nil
				s.markSlot(svc, t.Slot) // an empty slot may need a task, or the service may go
			}
		}
	}
	if t.Node != 0 {
		s.detach(t)
		s.nodeChanged(t, EffAssignments)
	}
	s.tasks.del(t.ID)
	s.emit(Effect{Kind: EffTaskDeleted, Task: t.ID, Node: t.Node, Service: t.Service})
}

func indexOf(ts []*Task, t *Task) int {
	for i, x := range ts {
		if x == t {
			return i
		}
	}
	return -1
}
