package api

import (
	"context"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// maxAssignWait caps an assignments long poll.
const maxAssignWait = 5 * time.Minute

// completeWait bounds how long a COMPLETE frame waits for this replica to
// catch up with the cluster.
const completeWait = 10 * time.Second

func (s *Server) agentAssignments(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		var req wire.AssignmentsRequest
		if e := decodeWire(ctx, &req); e != nil {
			return e
		}
		var err error
		if req.NodeID, err = s.callerNode(ctx, req.NodeID); err != nil {
			return err
		}
		ss := s.sessionFor(req.SessionID, req.NodeID)
		ss.mu.Lock()
		ss.beginLocked(req.Cursor)
		ss.mu.Unlock()
		if len(req.Cursor) == 0 {
			return s.sendComplete(ctx, ss, req.NodeID, false)
		}
		lost, ok := s.quorumState()
		if !ok {
			return s.noQuorum()
		}
		wait := min(time.Duration(max(req.Wait, 0)), maxAssignWait)
		timer := s.cfg.Clock.NewTimer(wait)
		defer timer.Stop()
		started, _ := s.leaders.LeaderNotice(routing.ClusterGroup)
		s.parked.Add(1)
		defer s.parked.Add(-1)
		for {
			pending, wake := s.cfg.Feed.nodePending(req.NodeID, req.Cursor)
			if pending {
				break
			}
			// The poll is also answered when the cluster's leader changes
			// to one this manager can name, so that the agent's next
			// heartbeat goes straight to it: a fleet whose leader died
			// otherwise tried the dead one first (or the same address
			// restarted, still catching up), each agent at its next beat.
			leader, notice := s.leaders.LeaderNotice(routing.ClusterGroup)
			// A log subscription for the node is handed over at once (logs.go).
			logWake := s.logs.NoticeWake(req.NodeID)
			logs := s.logs.HasNotices(req.NodeID, s.cfg.Clock.Now())
			if !logs && (leader == 0 || leader == started) {
				select {
				case <-wake:
					continue
				case <-logWake:
					continue
				case <-notice:
					continue
				case <-lost:
					return s.noQuorum()
				case <-timer.C():
				case <-s.closed:
				}
			}
			// Nothing changed (or only the leader): the agent asks again
			// from the same place, told the leader as known now.
			ss.mu.Lock()
			ss.given = req.Cursor
			ss.mu.Unlock()
			now, _ := s.leaders.LeaderNotice(routing.ClusterGroup)
			return s.wireReply(ctx, &wire.Assignments{Kind: wire.FrameIncremental, Last: true,
				AppliesTo: req.Cursor, ResultsIn: req.Cursor, Leader: s.managerAddr(now),
				Logs: s.logs.TakeNotices(req.NodeID, s.cfg.Clock.Now())})
		}
		return s.sendIncremental(ctx, ss, req.NodeID, req.Cursor)
	})(ctx, nil)
}

// assignment renders t for its node.
func assignment(st *statemachine.State, t *statemachine.Task) wire.Assignment {
	a := wire.Assignment{Task: t.ID, Slot: t.Slot, SpecVersion: t.SpecVersion, Desired: t.Desired, State: t.Status.State}
	if svc := st.Service(t.Service); svc != nil {
		a.Service = svc.Spec.Name
	}
	for _, at := range t.Attachments {
		addr := wire.Address{Addr: addrString(st, at)}
		if nw := st.Network(at.Network); nw != nil {
			addr.Network = nw.Name
		}
		a.Addresses = append(a.Addresses, addr)
	}
	return a
}

// addSpec adds the spec of t to a frame unless this session has it.
func addSpec(ss *session, st *statemachine.State, t *statemachine.Task, a *wire.Assignments) {
	svc := st.Service(t.Service)
	if svc == nil {
		return
	}
	k := specKey{svc.Spec.Name, t.SpecVersion}
	if ss.sent[k] {
		return
	}
	ss.sent[k] = true
	sp, _ := svc.SpecAt(t.SpecVersion) // the scheduler reserved this spec's resources
	a.Specs = append(a.Specs, wire.Spec{Service: k.service, Version: k.version, Command: slices.Clone(sp.Command),
		Env: slices.Clone(sp.Env), Dir: sp.Dir, StopGrace: sp.StopGrace})
}

// sendComplete answers with every task at or past assigned on node, in
// frames under the size cap.
//
// A COMPLETE replaces the agent's whole set, so it must never be older than
// anything the agent saw: each group is rendered only once this replica has
// applied everything committed before the request (a read-index barrier),
// not from its state as applied so far. A replica that lags in a group (it
// restarted, or follows that group's leader under load) would otherwise
// hand back tasks the agent already stopped and forgot, and the agent would
// start them again with addresses since given to other tasks.
func (s *Server) sendComplete(ctx *fasthttp.RequestCtx, ss *session, node statemachine.NodeID, resync bool) error {
	groups := s.reads.Groups()
	if err := s.caughtUp(groups); err != nil {
		return err
	}
	a := &wire.Assignments{Kind: wire.FrameComplete, Resync: resync, Last: true}
	a.ResultsIn = make(wire.Cursor, groups+1)
	a.Seqs = make([]uint64, groups+1)
	ss.mu.Lock()
	defer ss.mu.Unlock() // the session's sent specs
	for g := 1; g <= groups; g++ {
		err := s.reads.ReadLocal(g, func(st *statemachine.State) {
			a.ResultsIn[g] = st.LastIndex()
			if n := st.Node(node); n != nil {
				a.Seqs[g] = n.AssignSeq
			}
			for _, t := range st.NodeTasks(node) {
				addSpec(ss, st, t, a)
				a.Tasks = append(a.Tasks, assignment(st, t))
			}
		})
		if err != nil {
			return err
		}
	}
	ss.given = a.ResultsIn
	s.metrics.frames.complete.Inc()
	return s.wireReply(ctx, frames(a)...)
}

// caughtUp waits until this replica applied, in every service group,
// everything committed before the call (the groups' barriers in parallel).
func (s *Server) caughtUp(groups int) error {
	c, cancel := context.WithTimeout(context.Background(), completeWait)
	defer cancel()
	errs := make(chan error, groups)
	for g := 1; g <= groups; g++ {
		go func(g int) { errs <- s.reads.Read(c, g, func(*statemachine.State) {}) }(g)
	}
	var first error
	for range groups {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(time.Second),
			Message: "this manager cannot confirm it is up to date with the cluster (no quorum reached); retry"}
	}
	return nil
}

// sendIncremental answers with node's changes since cursor, or a COMPLETE
// (resync) if this manager's journal does not reach back that far.
func (s *Server) sendIncremental(ctx *fasthttp.RequestCtx, ss *session, node statemachine.NodeID, cursor wire.Cursor) error {
	groups := s.reads.Groups()
	a := &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: cursor}
	a.ResultsIn = make(wire.Cursor, groups+1)
	copy(a.ResultsIn, cursor)
	a.Seqs = make([]uint64, groups+1)
	resync := false
	quiet := s.cfg.Feed.quietGroups(node, cursor, groups)
	ss.mu.Lock()
	for g := 1; g <= groups && !resync; g++ {
		if quiet[g] != 0 {
			// Nothing for this node there: its cursor moves on without a
			// read under the group's lock (thousands of polls woken at
			// once, each reading every group, queued on those locks
			// behind the applies).
			a.ResultsIn[g] = max(a.ResultsIn[g], quiet[g])
			continue
		}
		err := s.reads.ReadLocal(g, func(st *statemachine.State) {
			es, ok := s.cfg.Feed.nodeChanges(node, g, cursor.Get(g))
			if !ok {
				resync = true
				return
			}
			a.ResultsIn[g] = max(a.ResultsIn[g], st.LastIndex())
			if n := st.Node(node); n != nil {
				a.Seqs[g] = n.AssignSeq
			}
			seen := map[statemachine.TaskID]bool{}
			for _, e := range es {
				if e.echo || seen[e.task] {
					continue
				}
				seen[e.task] = true
				t := st.Task(e.task)
				if t == nil || t.Node != node {
					a.Removed = append(a.Removed, e.task)
					continue
				}
				addSpec(ss, st, t, a)
				a.Tasks = append(a.Tasks, assignment(st, t))
			}
		})
		if err != nil {
			ss.mu.Unlock()
			return err
		}
	}
	if !resync {
		ss.given = a.ResultsIn
	}
	ss.mu.Unlock()
	if resync {
		ss.mu.Lock()
		clear(ss.sent) // a resync is a fresh start
		ss.mu.Unlock()
		return s.sendComplete(ctx, ss, node, true)
	}
	a.Logs = s.logs.TakeNotices(node, s.cfg.Clock.Now())
	s.metrics.frames.incremental.Inc()
	return s.wireReply(ctx, frames(a)...)
}

// frames splits a under the frame size cap.
func frames(a *wire.Assignments) []wire.Message {
	parts := wire.SplitComplete(a, wire.MaxFrame)
	out := make([]wire.Message, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}
