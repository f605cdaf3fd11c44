package statemachine

// Disconnects and reconnects (DESIGN.md, Nomad's lessons). A node that
// misses its heartbeat becomes `disconnected` when it holds tasks of services
// with a disconnect window (LostAfter > 0), else `down`. On a disconnected
// node, such a task that never ran there (below running: Nomad's pending
// allocation) is lost at once: a *lost* entry, desired shutdown, and its slot
// refilled by the restart policy; it never takes part in reconnect
// reconciliation. The others get an *unknown* history entry (their observed
// state stays where it was: ranks never go back) and, unless the service says
// NoReplace, a replacement in the same slot; the originals are held aside,
// neither stopped nor counted. LostAfter after the unknown entry, an
// original is lost: a *lost* entry, desired shutdown, and its slot is
// refilled by the restart policy. When the node heartbeats again, each
// original still unknown is held aside while the node is initializing and
// gets a *reconnect* entry when it is ready (it re-reported its tasks, or its
// re-report window passed): only then, on the re-reported facts,
// reconciliation keeps exactly one of original and replacement per slot (the
// service's ReconcileMode; a newer spec version always wins); an original
// that reported it failed while away is stopped and its replacement kept. Whether a task "needs
// reconnect" is read from its last connectivity history entry, never from a
// truncated event log. Tasks of services without a window on a disconnected
// node are treated as on a down node: replaced at once.

import "slices"

// ReconcileMode chooses between an original and its replacement when a
// disconnected node comes back.
type ReconcileMode uint8

// Reconcile modes (Nomad's; default best_score).
const (
	ReconcileBestScore ReconcileMode = iota
	ReconcileKeepOriginal
	ReconcileKeepReplacement
	ReconcileLongestRunning
	numReconcileModes
)

var reconcileNames = [...]string{"best_score", "keep_original", "keep_replacement", "longest_running"}

func (m ReconcileMode) String() string {
	if m < numReconcileModes {
		return reconcileNames[m]
	}
	return "ReconcileMode(?)"
}

// DisconnectPolicy is a service's disconnect window.
type DisconnectPolicy struct {
	// LostAfter is how long tasks on a disconnected node stay unknown before
	// they are lost, in nanoseconds; 0 (the default) means no window: the
	// tasks are replaced at once, as on a down node.
	LostAfter int64
	// NoReplace holds the slot for the unknown original instead of placing
	// a replacement at once (Nomad's replace=false; the default replaces).
	NoReplace bool
	// Reconcile picks the survivor on reconnect.
	Reconcile ReconcileMode
}

// connMarker returns the task's last connectivity history entry (unknown,
// reconnect or lost).
func connMarker(t *Task) (HistoryEntry, bool) {
	for i := t.History.Len() - 1; i >= 0; i-- {
		if e := t.History.At(i); e.Kind == HistUnknown || e.Kind == HistReconnect || e.Kind == HistLost {
			return e, true
		}
	}
	return HistoryEntry{}, false
}

// NeedsReconnect reports whether a task's last connectivity entry says it was
// left unknown by a disconnect.
func NeedsReconnect(t *Task) bool {
	e, ok := connMarker(t)
	return ok && e.Kind == HistUnknown
}

func reconnected(t *Task) bool {
	e, ok := connMarker(t)
	return ok && e.Kind == HistReconnect
}

// lost reports whether a task's last connectivity entry says it was given
// up while its node was away.
func lost(t *Task) bool {
	e, ok := connMarker(t)
	return ok && e.Kind == HistLost
}

func (s *State) window(t *Task) DisconnectPolicy {
	if svc := s.services[t.Service]; svc != nil {
		return svc.Spec.Disconnect
	}
	return DisconnectPolicy{}
}

// HasDisconnectWindow reports whether node n holds a live task of a service
// with a disconnect window: the node monitor then marks it disconnected, not
// down, when it misses its heartbeat.
func (s *State) HasDisconnectWindow(id NodeID) bool {
	n := s.nodes[id]
	if n == nil {
		return false
	}
	for _, t := range n.tasks {
		if !t.Desired.Stopping() && !t.Status.State.Terminal() && s.window(t).LostAfter > 0 {
			return true
		}
	}
	return false
}

// DisconnectWindowOpen reports whether disconnected node id still holds a
// task with a live disconnect window at now (unix nanoseconds): a task left
// unknown by the disconnect, still wanted, whose lost_after has not passed.
// Once no service group says so, the node monitor gives the node up: it
// goes down, and the down-node path applies (Nomad's rule).
func (s *State) DisconnectWindowOpen(id NodeID, now int64) bool {
	n := s.nodes[id]
	if n == nil || s.cfg.seams.keepsDisconnected() {
		return n != nil
	}
	for _, t := range n.tasks {
		if t.Desired.Stopping() || t.Status.State.Terminal() || !NeedsReconnect(t) {
			continue
		}
		if e, _ := connMarker(t); now < e.At+s.window(t).LostAfter {
			return true
		}
	}
	return false
}

func (s *State) mark(t *Task, kind HistoryKind) {
	s.keepTask(t)
	s.touchTask(t)
	s.countTask(t, -1) // the entry may change whether t counts as running
	t.History.add(HistoryEntry{At: s.now, State: t.Status.State, Kind: kind, By: CompNodeMonitor, Desired: t.Desired})
	s.countTask(t, 1)
	s.emit(Effect{Kind: EffTaskState, Node: t.Node, Task: t.ID, Service: t.Service})
}

// nodeConnectivity updates a node's tasks when its status changes from old
// to st.
func (s *State) nodeConnectivity(n *Node, old, st NodeStatus) {
	for _, t := range s.NodeTasks(n.ID) {
		live := !t.Desired.Stopping() && t.Status.State >= StateAssigned && !t.Status.State.Terminal()
		switch {
		case st == NodeDisconnected && live && s.window(t).LostAfter > 0 && t.Status.State < StateRunning && !s.cfg.seams.keepsPendingUnknown():
			// It never ran there (assigned, or prepared at most): lost at
			// once, as Nomad treats a pending allocation on a disconnected
			// node. It is stopped and replaced now and never takes part in
			// reconnect reconciliation; it keeps its addresses until its
			// node confirms it gone, and the agent, back, finds it flagged
			// to stop before it ever started it.
			s.mark(t, HistLost)
			s.stopTask(t, StopFailed)
		case st == NodeDisconnected && live && s.window(t).LostAfter > 0:
			s.mark(t, HistUnknown)
			s.unknown[t.ID] = t
			at := lostAt(t, s.services[t.Service])
			s.unknownDue.push(at, t.ID)
			s.noteDue(at)
		case st == NodeDisconnected && s.unknown[t.ID] == t && s.awaited(t):
			// Away again before it was ready, its window shut by a spec
			// change meanwhile: the old window's end is due again.
			at := lostAt(t, s.services[t.Service])
			s.unknownDue.push(at, t.ID)
			s.noteDue(at)
		case st == NodeDown && NeedsReconnect(t):
			s.mark(t, HistLost) // given up, or its reconnect failed
			delete(s.unknown, t.ID)
		case st == NodeReady && NeedsReconnect(t):
			// Back, and re-reported (or its re-report window passed): the
			// facts are in, reconciliation decides now.
			s.mark(t, HistReconnect)
			delete(s.unknown, t.ID)
		}
	}
}

func (s *State) noteDue(at int64) {
	if s.nextDue == 0 || at < s.nextDue {
		s.nextDue = at
	}
}

// heldAside reports whether t is an unknown original, not known to have
// ended, on a node that is disconnected or initializing (back, but not done
// re-reporting its tasks): no survivor is chosen on stale facts.
func (s *State) heldAside(t *Task) bool {
	if _, ok := s.unknown[t.ID]; !ok || t.Status.State.Terminal() {
		return false
	}
	n := s.nodes[t.Node]
	return n != nil && (n.Status == NodeDisconnected || n.Status == NodeInitializing && !s.cfg.seams.decidesEarly())
}

// heldAsideFacts reports, from replicated facts alone, whether t belongs in
// the unknown index: an original left unknown by a disconnect, still wanted
// and not ended, on a node that is away or back but not done re-reporting.
// The live index may also hold entries that no longer pass (removed lazily;
// no decision reads them); a state loaded from a snapshot holds exactly
// these, so that it goes on as the live one does.
func heldAsideFacts(t *Task, n *Node) bool {
	return n != nil && (n.Status == NodeDisconnected || n.Status == NodeInitializing) &&
		!t.Desired.Stopping() && !t.Status.State.Terminal() && NeedsReconnect(t)
}

// lostAt is when unknown task t of svc is lost if its node is not back.
func lostAt(t *Task, svc *Service) int64 {
	e, _ := connMarker(t)
	if svc == nil {
		return e.At
	}
	return e.At + svc.Spec.Disconnect.LostAfter
}

// awaited reports whether unknown task t still waits for its window to
// end: wanted, not ended, still unknown, on a node not back yet (a node
// back in time decides its tasks when it is ready or down, and one that
// disconnects again queues them anew). A task that is not awaited has no
// timer.
func (s *State) awaited(t *Task) bool {
	if settled(t) {
		return false
	}
	n := s.nodes[t.Node]
	return n == nil || n.Status != NodeInitializing
}

// settled reports whether unknown task t no longer waits for its node:
// stopped, ended, or no longer left unknown.
func settled(t *Task) bool {
	return t.Desired.Stopping() || t.Status.State.Terminal() || !NeedsReconnect(t)
}

// loseExpired loses the unknown originals whose window has passed, in ID
// order, and notes when the next window ends. Only the tasks whose window
// is due are looked at (the queue holds each awaited task at its current
// window end: spec changes that move it queue the service's tasks again).
func (s *State) loseExpired() {
	due := s.unknownDue.popDue(s.now)
	slices.Sort(due)
	for _, id := range slices.Compact(due) {
		t := s.unknown[id]
		if t == nil {
			continue
		}
		at := lostAt(t, s.services[t.Service])
		switch {
		case settled(t):
			delete(s.unknown, id) // stopped or settled meanwhile
		case !s.awaited(t):
		case s.now < at:
			s.unknownDue.push(at, id) // its window grew
		default:
			delete(s.unknown, id)
			s.mark(t, HistLost)
			s.stopTask(t, StopFailed)
			s.markSlot(s.services[t.Service], t.Slot)
		}
	}
	for len(s.unknownDue) > 0 {
		head := s.unknownDue[0]
		t := s.unknown[head.id]
		switch {
		case t == nil:
			s.unknownDue.drop()
		case settled(t):
			s.unknownDue.drop()
			delete(s.unknown, head.id) // stopped or settled meanwhile
		case !s.awaited(t):
			s.unknownDue.drop()
		case lostAt(t, s.services[t.Service]) != head.at:
			s.unknownDue.drop() // an older window's entry
			s.unknownDue.push(lostAt(t, s.services[t.Service]), head.id)
		default:
			s.noteDue(head.at)
			return
		}
	}
}

// requeueUnknown queues svc's unknown tasks at their window ends again,
// after a spec change that may have moved them.
func (s *State) requeueUnknown(svc *Service, prev DisconnectPolicy) {
	if svc.Spec.Disconnect.LostAfter == prev.LostAfter {
		return
	}
	for _, id := range sortedKeys(s.unknown) {
		if t := s.unknown[id]; t.Service == svc.ID && s.awaited(t) {
			at := lostAt(t, svc)
			s.unknownDue.push(at, id)
			s.noteDue(at)
		}
	}
}

// keepOnReconnect decides between two runnable tasks of a slot, at least one
// of them an original that reconnected: true keeps a.
func (s *State) keepOnReconnect(svc *Service, a, b *Task) bool {
	if a.SpecVersion != b.SpecVersion {
		return a.SpecVersion > b.SpecVersion // a newer spec version always wins
	}
	orig, repl := a, b
	if a.ID > b.ID {
		orig, repl = b, a
	}
	var keep *Task
	switch svc.Spec.Disconnect.Reconcile {
	case ReconcileKeepOriginal:
		keep = orig
	case ReconcileKeepReplacement:
		keep = repl
	case ReconcileLongestRunning:
		keep = orig
		if runningSince(repl) < runningSince(orig) {
			keep = repl
		}
	default:
		keep = orig
		if s.score(repl) > s.score(orig) {
			keep = repl
		}
	}
	return keep == a
}

// score ranks a task for best_score: running beats not yet running, and a
// task on a ready, active node beats one elsewhere; ties keep the original.
func (s *State) score(t *Task) int {
	sc := 0
	if t.Status.State == StateRunning {
		sc += 2
	}
	if n := s.nodes[t.Node]; n != nil && n.Status == NodeReady && n.Availability == AvailActive {
		sc++
	}
	return sc
}

// runningSince is when the task was last seen to start running (the newest
// running transition in its history), or the largest time if never.
func runningSince(t *Task) int64 {
	for i := 0; i < t.History.Len(); i++ {
		if e := t.History.At(i); e.Kind == HistTransition && e.State == StateRunning {
			return e.At
		}
	}
	return 1<<63 - 1
}
