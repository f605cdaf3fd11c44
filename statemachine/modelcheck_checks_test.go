package statemachine

import "fmt"

// The model checker's checks: what every explored step must respect
// (mcWatch, mcOwns: DESIGN.md's transition table and invariants) and the
// liveness check that fair progress reaches the desired state
// (checkProgress, mcRevive, mcDesired).

// mcWatch installs an observer on st that checks every change the action
// makes, at the moment it is made, against DESIGN.md's ownership table
// (written out again here, independently of the code under test). In manual
// mode every change must come from the acting component; otherwise the
// orchestrator, allocator and reaper react inside the same Apply.
func mcWatch(st *State, a mcAction, manual bool, retention int) *error {
	return newMCWatcher(manual, retention).watch(st, a)
}

// mcWatcher is mcWatch's observer, made once per worker and pointed at
// each step in turn (making its closures for every step was a twentieth
// of the checker's allocations).
type mcWatcher struct {
	manual    bool
	retention int
	st        *State
	a         mcAction
	err       error // the first illegal change of the step
	obs       observer
}

func newMCWatcher(manual bool, retention int) *mcWatcher {
	w := &mcWatcher{manual: manual, retention: retention}
	w.obs = observer{transition: w.transition, desired: w.desired, created: w.created, deleted: w.deleted, svcDeleted: w.svcDeleted}
	return w
}

// watch installs w's observer on st for step a, and returns where it
// records the step's first illegal change.
func (w *mcWatcher) watch(st *State, a mcAction) *error {
	w.st, w.a, w.err = st, a, nil
	st.observe = &w.obs
	return &w.err
}

func (w *mcWatcher) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
	}
}

func (w *mcWatcher) acting(c Component) bool {
	return c == w.a.by || (!w.manual && (c == CompOrchestrator || c == CompAllocator || c == CompReaper))
}

func (w *mcWatcher) transition(t *Task, from, to TaskState, by Component) {
	st, a := w.st, &w.a
	switch {
	case to <= from:
		w.fail("task %s went from %s to %s, not up in rank", st.taskName(t), from, to)
	case !w.acting(by):
		w.fail("%s moved task %s during a %s step", by, st.taskName(t), a.by)
	case !mcOwns(by, from, to):
		w.fail("%s moved task %s from %s to %s, which it does not own", by, st.taskName(t), from, to)
	case by == CompAgent && (a.cmd.Node != t.Node || !st.nodes[t.Node].Status.AcceptsUpdates()):
		w.fail("agent of node %d moved task %s on node %d (%s)", a.cmd.Node, st.taskName(t), t.Node, st.nodes[t.Node].Status)
	case by == CompAgent && to == StateRunning && from < StateRunning && t.Desired == DesiredRunning && mcWentSilent(t):
		w.fail("agent of node %d started task %s, which had not run when its node went silent (it is lost then, never started)",
			t.Node, st.taskName(t))
	}
}

// mcWentSilent reports whether t's history records its node going silent
// (an unknown, lost or reconnect entry). A task below running with such an
// entry had not run there when the node went silent: Nomad's pending
// allocation, lost at once (issue 33 item 3).
func mcWentSilent(t *Task) bool {
	for i := 0; i < t.History.Len(); i++ {
		switch t.History.At(i).Kind {
		case HistUnknown, HistLost, HistReconnect:
			return true
		}
	}
	return false
}

func (w *mcWatcher) desired(t *Task, from, to DesiredState) {
	st, a := w.st, &w.a
	if !w.acting(CompOrchestrator) {
		w.fail("desired state of %s changed during a %s step; only the orchestrator may", st.taskName(t), a.by)
	}
	if to < from && !(from == DesiredReady && to == DesiredRunning) {
		w.fail("desired state of %s went back from %s to %s", st.taskName(t), from, to)
	}
	if u := mcUnreported(st, t); to.Stopping() && a.by != CompUser && u != nil {
		w.fail("%s stopped %s while %s on node %d is not re-reported (node %s): decided on stale facts",
			a.by, st.taskName(t), st.taskName(u), u.Node, st.nodes[u.Node].Status)
	}
}

func (w *mcWatcher) created(t *Task) {
	st, a := w.st, &w.a
	if !w.acting(CompOrchestrator) || t.Status.State != StateNew || t.Node != 0 {
		w.fail("task %s created during a %s step in state %s on node %d", st.taskName(t), a.by, t.Status.State, t.Node)
	}
	// A global service's slot is its node: no task is created for it
	// while the node is away (issue 12 item 4: no replacement pinned to
	// a disconnected node).
	if svc := st.services[t.Service]; svc != nil && svc.Spec.Mode == ModeGlobal {
		if n := st.nodes[NodeID(t.Slot)]; n == nil || n.Status == NodeDisconnected || n.Status == NodeDown {
			w.fail("task %s of global service %q created for node %d, which is away", st.taskName(t), svc.Spec.Name, t.Slot)
		}
	}
}

func (w *mcWatcher) deleted(t *Task, beyond bool) {
	st := w.st
	ts := t.Status.State
	ok := (t.Desired == DesiredRemove && (ts <= StatePending || ts.Terminal())) ||
		(ts == StateOrphaned && t.Desired.Stopping())
	if !ok && beyond && ts.Terminal() && t.Desired.Stopping() {
		sl := st.services[t.Service].slots.get(t.Slot)
		ok = sl != nil && len(sl.tasks()) > w.retention
	}
	if !w.acting(CompReaper) {
		w.fail("task %s deleted during a %s step; only the reaper deletes", st.taskName(t), w.a.by)
	} else if !ok {
		w.fail("reaper deleted task %s while it was %s with desired %s", st.taskName(t), ts, t.Desired)
	}
}

func (w *mcWatcher) svcDeleted(svc *Service) {
	if !svc.Remove || svc.slots.len() != 0 {
		w.fail("inv7: service %q deleted while flagged=%v with %d slots", svc.Spec.Name, svc.Remove, svc.slots.len())
	}
}

// mcDesired checks that s is at the desired state: every live service has
// its tasks running (or stopped for good by its restart condition), removed
// services are gone, and no slot keeps more than the retention limit.
func mcDesired(s *State, b mcBounds, retention int) error {
	for _, sid := range s.ServiceIDs() {
		svc := s.services[sid]
		if svc.Remove {
			return fmt.Errorf("service %q flagged for removal still exists", svc.Spec.Name)
		}
		slotNums, slots := s.SlotTasks(sid)
		want := map[uint32]bool{}
		if svc.Spec.Mode == ModeReplicated {
			// replicas slots, numbered from 1 but sparse after a
			// scale-down; a slot given up must be gone
			if len(slotNums) != int(svc.Spec.Replicas) {
				return fmt.Errorf("service %q has %d slots, want %d", svc.Spec.Name, len(slotNums), svc.Spec.Replicas)
			}
			for _, n := range slotNums {
				want[n] = true
			}
		} else {
			for _, nid := range s.NodeIDs() {
				if n := s.nodes[nid]; n.Status == NodeReady && n.Availability == AvailActive {
					want[uint32(nid)] = true
				}
			}
		}
		seen := map[uint32]bool{}
		for i, n := range slotNums {
			ts := slots[i]
			seen[n] = true
			if len(ts) > retention {
				return fmt.Errorf("service %q slot %d keeps %d tasks, more than %d", svc.Spec.Name, n, len(ts), retention)
			}
			live := 0
			for _, t := range ts {
				if !t.Status.State.Terminal() {
					if !want[n] || t.Status.State != StateRunning || t.Desired != DesiredRunning {
						return fmt.Errorf("service %q slot %d: task %s is %s with desired %s", svc.Spec.Name, n, s.taskName(t), t.Status.State, t.Desired)
					}
					live++
				}
			}
			if want[n] && live != 1 {
				last := ts[len(ts)-1]
				if live == 0 && !ShouldRestart(svc.Spec.Restart.Condition, last.Status.State) && last.SpecVersion == svc.SpecVersion {
					continue // stopped for good by its restart condition
				}
				return fmt.Errorf("service %q slot %d has %d running tasks", svc.Spec.Name, n, live)
			}
		}
		for n := range want {
			if !seen[n] {
				return fmt.Errorf("service %q slot %d has no task", svc.Spec.Name, n)
			}
		}
	}
	return nil
}

// mcOwns is DESIGN.md's table: which component may move a task between
// observed states (agent reports may coalesce several agent steps).
var mcAgentChain = map[TaskState]bool{StateAccepted: true, StatePreparing: true, StateReady: true, StateStarting: true, StateRunning: true}

func mcOwns(c Component, from, to TaskState) bool {
	agentChain := mcAgentChain
	switch c {
	case CompAllocator:
		return from == StateNew && to == StatePending
	case CompScheduler:
		return from == StatePending && to == StateAssigned
	case CompNodeMonitor:
		return from >= StateAssigned && from <= StateRunning && to == StateOrphaned
	case CompAgent:
		if from < StateAssigned || from > StateRunning {
			return false
		}
		return agentChain[to] || to == StateComplete || to == StateFailed || to == StateShutdown ||
			(to == StateRejected && from <= StateStarting)
	}
	return false
}

// mcScaleCheck is the scale-down rule, checked at every step: a step that
// gives up slots of a replicated service never gives up one whose task runs
// while it keeps one whose task is not yet on a node.
func mcScaleCheck(before, after *State) error {
	for _, sid := range after.ServiceIDs() {
		svc, old := after.services[sid], before.services[sid]
		if old == nil || svc.Remove || svc.Spec.Mode != ModeReplicated {
			continue
		}
		var gaveUpRunning, keptUnplaced string
		for n, sl := range old.slots.all() {
			if mcGivenUp(sl) {
				continue
			}
			h := mcHolder(sl)
			now := svc.slots.get(n)
			switch {
			case now != nil && mcGivenUp(now) && h != nil && h.Status.State == StateRunning:
				gaveUpRunning = before.taskName(h)
			case now != nil && !mcGivenUp(now) && h != nil && h.Node == 0:
				keptUnplaced = before.taskName(h)
			}
		}
		if gaveUpRunning != "" && keptUnplaced != "" {
			return fmt.Errorf("scale-down of %q gave up running task %s and kept %s, which is not on a node",
				svc.Spec.Name, gaveUpRunning, keptUnplaced)
		}
	}
	return nil
}

// mcHolder is the newest task of a slot that is wanted and not finished
// (written out again here, independently of the code under test).
func mcHolder(sl *slot) *Task {
	for i := len(sl.tasks()) - 1; i >= 0; i-- {
		if t := sl.tasks()[i]; !t.Desired.Stopping() && !t.Status.State.Terminal() {
			return t
		}
	}
	return nil
}

// mcGivenUp reports whether every task of a slot is flagged remove.
func mcGivenUp(sl *slot) bool {
	for _, t := range sl.tasks() {
		if t.Desired != DesiredRemove {
			return false
		}
	}
	return true
}

// mcUnreported returns a task of t's slot, of t's spec version and not
// ended, left unknown by a disconnect on a node that is back but has not
// re-reported its tasks (initializing): while there is one, no step but a
// user's may stop a task of the slot (issue 12 item 3: reconnect
// reconciliation decides on re-reported facts).
func mcUnreported(st *State, t *Task) *Task {
	svc := st.services[t.Service]
	if svc == nil || t.Status.State.Terminal() {
		return nil
	}
	sl := svc.slots.get(t.Slot)
	if sl == nil {
		return nil
	}
	for _, u := range sl.tasks() {
		n := st.nodes[u.Node]
		if n != nil && n.Status == NodeInitializing && NeedsReconnect(u) && u.SpecVersion == t.SpecVersion && !u.Status.State.Terminal() {
			return u
		}
	}
	return nil
}

// mcRevive is the last resort of fair progress: when nothing else is
// enabled and no node is up (ready or coming back), the lowest down node
// comes back. Liveness is promised only for a cluster that keeps a node:
// with every node down nothing can run, and with two events both nodes may
// go down. A disconnected node is not revived: it must be given up first
// (issue 12 item 2, which the never-down seeded bug checks), and only then,
// down, may it come back; nor is a down node revived while another is up,
// so the down-node path (orphans, freed addresses) runs to its end.
func mcRevive(s *State) (mcAction, bool) {
	down := NodeID(0)
	for _, nid := range s.NodeIDs() {
		switch s.nodes[nid].Status {
		case NodeReady, NodeInitializing:
			return mcAction{}, false
		case NodeDown:
			if down == 0 {
				down = nid
			}
		}
	}
	if down == 0 {
		return mcAction{}, false
	}
	return mcAction{format: "node n%d reconnects", args: []any{down}, by: CompNodeMonitor,
		cmd: Command{Kind: CmdSetNodeStatus, Node: down, NodeStatus: NodeInitializing}}, true
}

// mcStep is a step taken while expanding a state: the action, the state
// it led to (nil: Apply rejected it), and that state's key and encoding
// when they were computed.
type mcStep struct {
	act   mcAction
	after *State
	canon []byte
	sk    uint64 // after's mcStateKey (0: not computed)
	// applied: the step was taken (after is its result)
	applied bool
}

// checkProgress runs fair progress from a state (no user actions, no
// failures; time passes, so down nodes' tasks get orphaned) until nothing is
// enabled, and checks that the result is the desired state. wk.memo holds
// the states already known to get there.
//
// steps lists the steps already taken from s (its expansion, every action
// of mcActions in its order): the first progress step takes those of its
// actions marked progress, which are the progress actions in the same
// order (TestModelCheckProgressActionsAreMarked), instead of listing and
// applying them again.
//
// The walk also stops at a state in c.checked: one whose own check passed
// in an earlier chunk (with any budgets: progress reads none). By
// induction on the order of the checks every walk then reaches the desired
// state, and no cycle of states vouching for each other can hide a
// livelock (a state is vouched for only by one checked before it). Before,
// the walk went on to the fixpoint whenever the worker's memo had been
// cleared, which made every check long in large runs.
//
// canon is s's encoding, or nil: it is computed when a step's result has
// s's key (a step changed s if and only if the encodings differ).
func (c *mcChecker) checkProgress(s *State, canon []byte, sk uint64, wk *mcWorker, steps []mcStep) error {
	var path []uint64
	for step := 0; ; step++ {
		if step == 500 {
			return fmt.Errorf("no fixpoint after 500 progress steps (livelock)")
		}
		if sk == 0 {
			sk = mcStateKey(s)
		}
		k := mcWithEvents(mcBaseOf(sk, mcMeta{}), 0) // mcKey(s, mcMeta{})
		if wk.memo.has(k) || c.checked != nil && c.checked.has(k) {
			break
		}
		path = append(path, k)
		moved := false
		if steps == nil {
			acts := mcActionsIn(&wk.walk, s, mcMeta{}, c.b, true)
			steps = wk.walk.stepsFor(len(acts))
			for i, a := range acts {
				steps[i].act = a
			}
		}
		for _, st := range steps {
			a := st.act
			if !a.progress {
				continue
			}
			next, nextCanon, nextSK := st.after, st.canon, st.sk
			if !st.applied {
				var err error
				if next, err = c.applyOn(wk, s, a); err != nil {
					return fmt.Errorf("illegal progress step %q: %w", a.desc(), err)
				}
			}
			if next == nil {
				continue
			}
			// Did the step change the state? States with different keys
			// differ; the encodings (computed only then) decide between
			// states with one key.
			if nextSK == 0 {
				nextSK = mcStateKey(next)
			}
			changed := nextSK != sk
			if !changed {
				if canon == nil {
					canon = c.canonical(s)
				}
				if nextCanon == nil {
					nextCanon = c.canonical(next)
				}
				changed = string(nextCanon) != string(canon)
			}
			if changed {
				s, canon, sk, moved = next, nextCanon, nextSK, true
				break
			}
		}
		steps = nil // the steps taken from the first state only
		if !moved {
			if a, ok := mcRevive(s); ok {
				next, err := c.applyOn(wk, s, a)
				if err != nil || next == nil {
					return fmt.Errorf("progress could not bring a node back (%q): %v", a.desc(), err)
				}
				s, canon, sk = next, nil, 0
				continue
			}
			if err := mcDesired(s, c.b, c.retention); err != nil {
				return fmt.Errorf("progress stopped short of the desired state: %w", err)
			}
			break
		}
	}
	for _, k := range path {
		wk.memo.add(k)
	}
	return nil
}
