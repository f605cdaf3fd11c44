package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The model checker's actions: what every component may do in a state.

// mcServices are the two services: a replicated one (restart on-failure) and
// a global one (restart any).
func mcServices(b mcBounds) [2]ServiceSpec {
	web := ServiceSpec{Name: "web", Replicas: b.replicas, Restart: RestartPolicy{Condition: RestartOnFailure}}
	mon := ServiceSpec{Name: "mon", Mode: ModeGlobal}
	if b.net {
		web.Networks = []string{"net"}
		web.Disconnect = DisconnectPolicy{LostAfter: 60e9}
		// a window for the global service too: its task is held aside,
		// and no replacement may be pinned to the node that is away
		mon.Disconnect = DisconnectPolicy{LostAfter: 60e9}
	}
	return [2]ServiceSpec{web, mon}
}

// mcActions lists every action enabled (or possibly enabled: Apply decides)
// in s. progressOnly keeps the actions of fair progress: no user actions, no
// events, no new failures.
func mcActions(s *State, m mcMeta, b mcBounds, progressOnly bool) []mcAction {
	return mcActionsIn(&mcActBuf{}, s, m, b, progressOnly)
}

// mcActBuf is space for a list of actions, their descriptions' arguments
// and the steps taken with them, reused from list to list (allocating
// them was a twentieth of the checker's time): a list, and what its
// actions describe, lives until the next list is made in its space.
type mcActBuf struct {
	acts  []mcAction
	args  []any
	refs  []mcTaskRef
	steps []mcStep
}

// ref returns a task's name for a description, in b's space (a full
// array is left to the names that point into it).
func (b *mcActBuf) ref(s *State, t *Task) *mcTaskRef {
	if len(b.refs) == cap(b.refs) {
		b.refs = make([]mcTaskRef, 0, max(16, 2*cap(b.refs)))
	}
	b.refs = append(b.refs, mcTaskRef{s, t})
	return &b.refs[len(b.refs)-1]
}

// stepsFor returns n zero steps in b's space.
func (b *mcActBuf) stepsFor(n int) []mcStep {
	b.steps = slices.Grow(b.steps[:0], n)[:n]
	clear(b.steps)
	return b.steps
}

// mcActionsIn is mcActions, the list made in buf's space.
func mcActionsIn(buf *mcActBuf, s *State, m mcMeta, b mcBounds, progressOnly bool) []mcAction {
	acts, argBuf := buf.acts[:0], buf.args[:0]
	buf.refs = buf.refs[:0]
	if acts == nil {
		acts, argBuf = make([]mcAction, 0, 16), make([]any, 0, 32)
	}
	defer func() { buf.acts, buf.args = acts, argBuf }()
	add := func(by Component, event bool, cmd Command, format string, args ...any) {
		lo := len(argBuf)
		argBuf = append(argBuf, args...)
		acts = append(acts, mcAction{format: format, args: argBuf[lo:len(argBuf):len(argBuf)], by: by, cmd: cmd, event: event, progress: !event && by != CompUser})
	}
	// unfair: a node's reconnection is not fair progress (mcRevive
	// brings a node back when nothing else can happen)
	unfair := func() { acts[len(acts)-1].progress = false }
	canEvent := !progressOnly && int(m.events) < b.events
	specs := mcServices(b)
	if !progressOnly {
		for i := range specs {
			if i > 0 && b.webOnly {
				break
			}
			spec := specs[i]
			if m.created&(1<<i) == 0 {
				bit := uint8(1 << i)
				acts = append(acts, mcAction{format: "user create %s", args: []any{spec.Name}, by: CompUser,
					cmd: Command{Kind: CmdCreateService, Spec: &spec}, meta: func(m *mcMeta) { m.created |= bit }})
			}
			svc := s.ServiceByName(spec.Name)
			if svc == nil || svc.Remove {
				continue
			}
			add(CompUser, false, Command{Kind: CmdRemoveService, Name: spec.Name}, "user remove %s", spec.Name)
			if canEvent {
				up := cloneSpec(&svc.Spec)
				up.Image = fmt.Sprintf("v%d", svc.SpecVersion+1)
				add(CompUser, true, Command{Kind: CmdUpdateService, Spec: &up}, "user update %s image %s", spec.Name, up.Image)
				if spec.Mode == ModeReplicated && b.replicas > 1 {
					sc := cloneSpec(&svc.Spec)
					sc.Replicas = b.replicas + 1 - svc.Spec.Replicas
					if sc.Replicas > b.replicas {
						sc.Replicas = b.replicas
					}
					if sc.Replicas != svc.Spec.Replicas {
						add(CompUser, true, Command{Kind: CmdUpdateService, Spec: &sc}, "user scale %s to %d", spec.Name, sc.Replicas)
					}
				}
			}
		}
	}
	for _, id := range s.ServiceIDs() {
		if !b.manual {
			break // reactions run inside Apply
		}
		add(CompOrchestrator, false, Command{Kind: CmdReconcile, Name: s.services[id].Spec.Name}, "orchestrator reconcile %s", s.services[id].Spec.Name)
	}
	for _, nid := range s.NodeIDs() {
		n := s.nodes[nid]
		switch n.Status {
		case NodeReady:
			if canEvent {
				add(CompNodeMonitor, true, Command{Kind: CmdSetNodeStatus, Node: nid, NodeStatus: NodeDown}, "node n%d down", nid)
				if b.net {
					add(CompNodeMonitor, true, Command{Kind: CmdSetNodeStatus, Node: nid, NodeStatus: NodeDisconnected}, "node n%d disconnects", nid)
				}
			}
		case NodeDisconnected:
			// Given up on once no task has a live window (time passes), or
			// it comes back.
			if !s.DisconnectWindowOpen(nid, mcLater(s)) {
				acts = append(acts, mcAction{format: "node n%d given up: down", args: []any{nid}, by: CompNodeMonitor,
					cmd: Command{Kind: CmdSetNodeStatus, Node: nid, NodeStatus: NodeDown}, at: mcLater(s), progress: true})
			}
			if !progressOnly {
				add(CompNodeMonitor, false, Command{Kind: CmdSetNodeStatus, Node: nid, NodeStatus: NodeInitializing}, "node n%d reconnects", nid)
				unfair()
			}
		case NodeDown:
			// Past its orphan timeout the node monitor orphans the node
			// in one command (as the engine's monitor does): its
			// assigned..running tasks and its quarantine. Offered while
			// it would change something.
			if s.mcOrphanable(nid) {
				add(CompNodeMonitor, false, Command{Kind: CmdOrphanNode, Node: nid}, "node-monitor n%d orphaned", nid)
			}
			if !progressOnly {
				add(CompNodeMonitor, false, Command{Kind: CmdSetNodeStatus, Node: nid, NodeStatus: NodeInitializing}, "node n%d reconnects", nid)
				unfair()
			}
		case NodeInitializing:
			add(CompNodeMonitor, false, Command{Kind: CmdSetNodeStatus, Node: nid, NodeStatus: NodeReady}, "node n%d ready", nid)
		}
	}
	for _, id := range s.TaskIDs() {
		t := s.tasks.get(id)
		name := buf.ref(s, t)
		st := t.Status.State
		switch {
		case st == StateNew && b.manual:
			add(CompAllocator, false, Command{Kind: CmdAllocate, Task: id}, "allocator %s pending", name)
		case st == StatePending:
			for _, nid := range s.NodeIDs() {
				add(CompScheduler, false, Command{Kind: CmdAssign, Task: id, Node: nid}, "scheduler %s -> n%d", name, nid)
			}
		case st >= StateAssigned && st <= StateRunning:
			report := func(to TaskState, event bool) {
				add(CompAgent, event, Command{Kind: CmdTaskStatus, Task: id, Node: t.Node, State: to}, "agent n%d %s %s", t.Node, name, to)
			}
			if t.Desired.Stopping() {
				report(StateShutdown, false)
			} else if t.Desired == DesiredReady {
				if st < StateReady {
					report(StateReady, false) // held: prepare, do not start
				}
			} else if st < StateRunning {
				report(StateRunning, false) // a coalesced report: assigned → running
			}
			if canEvent {
				if st <= StateStarting {
					report(StateRejected, true)
				}
				if st == StateRunning {
					report(StateFailed, true)
					report(StateComplete, true)
				}
			}
		}
		if b.manual && s.Reapable(id) {
			add(CompReaper, false, Command{Kind: CmdReap, Task: id}, "reaper delete %s", name)
		}
	}
	if b.net {
		if s.NextDue() != 0 {
			acts = append(acts, mcAction{format: "time passes", by: CompNodeMonitor, cmd: Command{Kind: CmdTick}, at: mcLater(s), progress: true})
		}
		for _, nid := range s.NodeIDs() {
			n := s.nodes[nid]
			if !n.Status.AcceptsUpdates() || !s.mcQuarantined(nid) {
				continue // a sync with nothing quarantined changes nothing
			}
			var holds []TaskID
			for _, t := range s.NodeTasks(nid) {
				if !t.Status.State.Terminal() {
					holds = append(holds, t.ID)
				}
			}
			add(CompAgent, false, Command{Kind: CmdNodeSync, Node: nid, Seq: n.AssignSeq, Tasks: holds}, "agent n%d sync seq=%d", nid, n.AssignSeq)
		}
	}
	if b.bug == mcBugReapLive && b.manual {
		// The seeded bug's reaper also offers running tasks.
		for _, id := range s.TaskIDs() {
			if t := s.tasks.get(id); t.Status.State == StateRunning && !s.Reapable(id) {
				add(CompReaper, false, Command{Kind: CmdReap, Task: id}, "reaper delete %s", buf.ref(s, t))
			}
		}
	}
	return acts
}

// mcOrphanable reports whether a node-level orphan of node id would change
// anything: it has a task that can be orphaned, or addresses quarantined.
func (s *State) mcOrphanable(id NodeID) bool {
	for _, t := range s.nodes[id].tasks {
		if CanTransition(CompNodeMonitor, t.Status.State, StateOrphaned) {
			return true
		}
	}
	return s.mcQuarantined(id)
}

// mcTaskRef names a task in an action's description, when it is asked
// for (s is not changed afterwards: steps are applied to copies).
type mcTaskRef struct {
	s *State
	t *Task
}

func (r mcTaskRef) String() string { return r.s.taskName(r.t) }

func (s *State) taskName(t *Task) string {
	name := "?"
	if svc := s.services[t.Service]; svc != nil {
		name = svc.Spec.Name
	}
	return fmt.Sprintf("%s.%d#%d", name, t.Slot, uint64(t.ID)&(1<<48-1))
}

// TestModelCheckProgressActionsAreMarked: the actions mcActions marks
// progress are exactly, and in the same order, those it lists with
// progressOnly (the liveness walk's first step takes them from the
// expansion's list), whatever the budgets, in every mode.
func TestModelCheckProgressActionsAreMarked(t *testing.T) {
	for _, b := range []mcBounds{
		{nodes: 2, replicas: 2, retained: 1, events: 1, net: true},
		{nodes: 2, replicas: 2, retained: 1, events: 1, manual: true},
	} {
		c := &mcChecker{b: b, retention: b.retained + 1}
		init := mcInitial(b, c.retention)
		queue := []mcStateMeta{{init, mcMeta{}}}
		seen := map[uint64]bool{mcKey(init, mcMeta{}): true}
		checked := 0
		for len(queue) > 0 && len(seen) < 3000 {
			cur := queue[0]
			queue = queue[1:]
			var want []string
			for _, a := range mcActions(cur.s, mcMeta{}, b, true) {
				want = append(want, fmt.Sprintf("%s %+v", a.desc(), a.cmd))
			}
			for _, m := range []mcMeta{cur.m, {events: uint8(b.events), created: cur.m.created}} {
				var got []string
				for _, a := range mcActions(cur.s, m, b, false) {
					if a.progress {
						got = append(got, fmt.Sprintf("%s %+v", a.desc(), a.cmd))
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("net=%v manual=%v: actions marked progress:\n%s\nprogress actions:\n%s",
						b.net, b.manual, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				checked++
			}
			for _, a := range mcActions(cur.s, cur.m, b, false) {
				after, err := c.apply(cur.s, a)
				if err != nil || after == nil {
					continue
				}
				m := a.metaAfter(cur.m)
				if k := mcKey(after, m); !seen[k] {
					seen[k] = true
					queue = append(queue, mcStateMeta{after, m})
				}
			}
		}
		t.Logf("net=%v manual=%v: %d lists compared", b.net, b.manual, checked)
	}
}
