package statemachine

// Each service keeps its tasks counted (ServiceCounts) as they are
// created, move, change their desired state and are deleted, so listing
// services reads the counts instead of walking every task: a client
// polling the service list of a million-task cluster once a second took a
// seventh of the leader's CPU walking them. The invariant check compares
// the counts with a walk (countServiceTasks).

// runningCounted reports whether t counts in its service's Running: it
// runs, is meant to, and at the service's current spec version, and it is
// not held aside (see runningAny).
func runningCounted(t *Task, svc *Service) bool {
	return runningAny(t) && t.SpecVersion == svc.SpecVersion
}

// runningAny reports whether t counts in its service's RunningAny: it runs
// and is meant to, at whatever spec version, and its node is not away. An
// original left unknown by a disconnect (its last connectivity entry;
// DESIGN.md "Disconnects and reconnects") is not known to run: its
// replacement fills the slot, so counting both would show a service above
// its replicas while the node is away. It counts again once its node is
// back and ready (reconciliation keeps one task per slot in the same
// entry) and never once it is lost. The rule reads the task alone, so the
// counts stay exact as long as every change of a task's history is
// bracketed by countTask (mark, transition, setDesired).
func runningAny(t *Task) bool {
	return t.Status.State == StateRunning && t.Desired == DesiredRunning && !NeedsReconnect(t)
}

// countTask adds (sign 1) or takes away (sign -1) t's part of its
// service's state and running counts.
func (s *State) countTask(t *Task, sign int) {
	svc := s.services[t.Service]
	if svc == nil {
		return
	}
	svc.counts.ByState[t.Status.State] += sign
	if runningCounted(t, svc) {
		svc.counts.Running += sign
	}
	if runningAny(t) {
		svc.counts.RunningAny += sign
	}
}

// countLive adds d to the tasks of t's slot that are not being stopped,
// and keeps the service's active slots (those with such a task) in step.
func (s *State) countLive(t *Task, d int) {
	svc := s.services[t.Service]
	if svc == nil {
		return
	}
	sl := svc.slots.get(t.Slot)
	if sl == nil {
		return
	}
	was := sl.live > 0
	sl.live += int32(d)
	switch now := sl.live > 0; {
	case now && !was:
		svc.counts.Active++
	case was && !now:
		svc.counts.Active--
	}
}

// recountRunning counts svc's running tasks again: its spec version
// changed, so which of them are current did too.
func (s *State) recountRunning(svc *Service) {
	svc.counts.Running = 0
	for _, sl := range svc.slots.all() {
		for _, t := range sl.tasks() {
			if runningCounted(t, svc) {
				svc.counts.Running++
			}
		}
	}
}

// countServiceTasks counts svc's tasks by walking its slots: what
// svc.counts must equal.
func countServiceTasks(svc *Service) ServiceCounts {
	var c ServiceCounts
	for _, sl := range svc.slots.all() {
		active := false
		for _, t := range sl.tasks() {
			c.ByState[t.Status.State]++
			if runningCounted(t, svc) {
				c.Running++
			}
			if runningAny(t) {
				c.RunningAny++
			}
			active = active || !t.Desired.Stopping()
		}
		if active {
			c.Active++
		}
	}
	return c
}
