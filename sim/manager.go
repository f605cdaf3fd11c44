package sim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"shoal/cluster"
	"shoal/manager/control"
	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// manager is the managers' side of the agent protocol, in process: each
// call is served by one manager replica (the world chooses which), through
// the control package over that replica's view of the groups. Heartbeats
// and re-reports go to the cluster group's leader (the agent's client
// follows the leader), as does the node monitor duty.
//
// The assignment stream is not in the control package yet: until it is,
// assignments answers every poll with news for the node with a COMPLETE
// frame rendered after a read barrier on the serving replica, and parks
// the others until news or the poll's wait.
type manager struct {
	w *World
	// lastChange: per group, per node, the last index that changed the
	// node's assignments (the leader's applied effects).
	lastChange []map[statemachine.NodeID]uint64
	sessions   uint64
	parked     []*parkedPoll
}

type parkedPoll struct {
	r     int
	req   *wire.AssignmentsRequest
	until time.Time
	reply func(wire.Message, error)
}

func newManager(w *World) *manager {
	m := &manager{w: w}
	for range w.gs.g {
		m.lastChange = append(m.lastChange, map[statemachine.NodeID]uint64{})
	}
	return m
}

// onApply records which nodes' assignments an applied entry changed.
func (m *manager) onApply(g int, index uint64, effs []statemachine.Effect) {
	for _, e := range effs {
		if (e.Kind == statemachine.EffAssignments || e.Kind == statemachine.EffSeqAdvanced) && e.Node != 0 {
			m.lastChange[g][e.Node] = index
		}
	}
}

// wireErr is the answer to a call that failed: a *wire.Error as it is,
// a cluster error as unavailable (retry).
func wireErr(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	return &wire.Error{Code: wire.CodeUnavailable, Message: "the cluster cannot take this right now; retry: " + err.Error(),
		RetryAfter: int64(time.Second)}
}

// serve answers one request on replica r; reply gets the answer, at once
// or (a parked poll) later.
func (m *manager) serve(r int, req wire.Message, reply func(wire.Message, error)) {
	ctx := context.Background()
	v := m.w.view(r)
	switch q := req.(type) {
	case *wire.SessionRequest:
		opened, err := control.OpenSession(ctx, v, q)
		if err != nil {
			reply(nil, wireErr(err))
			return
		}
		m.sessions++
		period := time.Second
		if mon := m.w.mon; mon != nil {
			period = mon.Period(opened.Nodes)
		}
		reply(&wire.Session{NodeID: opened.Node, SessionID: m.sessions, HeartbeatPeriod: int64(period),
			SyncInterval: int64(m.w.cfg.SyncInterval), Managers: opened.Managers, Groups: uint16(v.Groups())}, nil)
	case *wire.Heartbeat:
		reply(m.heartbeat(ctx, q))
	case *wire.StatusBatch:
		ack, err := control.SubmitStatus(ctx, v, reReports{m.w, r}, q)
		if err != nil {
			reply(nil, wireErr(err))
			return
		}
		reply(ack, nil)
	case *wire.SyncRequest:
		destroy, err := control.Sync(ctx, v, q)
		if err != nil {
			reply(nil, wireErr(err))
			return
		}
		reply(&wire.SyncAnswer{Destroy: destroy}, nil)
	case *wire.AssignmentsRequest:
		if len(q.Cursor) == 0 || m.news(q.NodeID, q.Cursor) {
			reply(m.complete(r, q.NodeID), nil)
			return
		}
		m.parked = append(m.parked, &parkedPoll{r: r, req: q, until: m.w.clk.Now().Add(time.Duration(q.Wait)), reply: reply})
	default:
		reply(nil, &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf("no such call: %T", req)})
	}
}

func (m *manager) heartbeat(ctx context.Context, hb *wire.Heartbeat) (wire.Message, error) {
	mon := m.w.mon
	if mon == nil {
		return nil, &wire.Error{Code: wire.CodeUnavailable, Message: "no leader", RetryAfter: int64(time.Second)}
	}
	b, err := mon.Heartbeat(ctx, hb.NodeID, m.w.clk.Now())
	switch {
	case errors.Is(err, cluster.ErrNotMonitoring), errors.Is(err, cluster.ErrMonitorStarting):
		return nil, &wire.Error{Code: wire.CodeUnavailable, Message: "the leader is starting; retry", RetryAfter: int64(100 * time.Millisecond)}
	case errors.Is(err, cluster.ErrUnknownNode):
		removed := false
		m.w.gs.read(m.w.leader, route.ClusterGroup, func(st *statemachine.State) { removed = st.NodeRemoved(hb.NodeID) })
		if removed {
			return nil, &wire.Error{Code: wire.CodeNodeRemoved, Message: "this node was removed from the cluster"}
		}
		return nil, &wire.Error{Code: wire.CodeUnavailable, Message: "the leader does not know this node yet; retry", RetryAfter: int64(500 * time.Millisecond)}
	case err != nil:
		return nil, wireErr(err)
	}
	st, _ := mon.NodeStatus(hb.NodeID)
	return &wire.HeartbeatAck{Period: int64(b.TTL), Status: st}, nil
}

// reReports is the node monitor as a status batch served on replica r
// sees it: running only on the leader.
type reReports struct {
	w *World
	r int
}

func (x reReports) Monitoring() bool { return x.w.mon != nil && x.r == x.w.leader }

func (x reReports) MarkReReported(node statemachine.NodeID) bool { return x.w.mon.MarkReReported(node) }

// news reports whether node's assignments changed past cursor.
func (m *manager) news(node statemachine.NodeID, cursor wire.Cursor) bool {
	for g := 1; g < len(m.lastChange); g++ {
		if m.lastChange[g][node] > cursor.Get(g) {
			return true
		}
	}
	return false
}

// complete renders node's whole assignment set on replica r after a read
// barrier in every service group.
func (m *manager) complete(r int, node statemachine.NodeID) *wire.Assignments {
	v := m.w.view(r)
	groups := v.Groups()
	a := &wire.Assignments{Kind: wire.FrameComplete, Last: true, ResultsIn: make(wire.Cursor, groups+1), Seqs: make([]uint64, groups+1)}
	specs := map[string]bool{}
	for g := 1; g <= groups; g++ {
		_ = v.Read(context.Background(), g, func(st *statemachine.State) {
			a.ResultsIn[g] = st.LastIndex()
			if n := st.Node(node); n != nil {
				a.Seqs[g] = n.AssignSeq
			}
			for _, t := range st.NodeTasks(node) {
				a.Tasks = append(a.Tasks, assignment(st, t))
				svc := st.Service(t.Service)
				if svc == nil {
					continue
				}
				k := fmt.Sprintf("%s/%d", svc.Spec.Name, t.SpecVersion)
				if specs[k] {
					continue
				}
				specs[k] = true
				sp, _ := svc.SpecAt(t.SpecVersion)
				a.Specs = append(a.Specs, wire.Spec{Service: svc.Spec.Name, Version: t.SpecVersion,
					Command: slices.Clone(sp.Command), Env: slices.Clone(sp.Env), Dir: sp.Dir, StopGrace: sp.StopGrace})
			}
		})
	}
	return a
}

// assignment renders t for its node.
func assignment(st *statemachine.State, t *statemachine.Task) wire.Assignment {
	a := wire.Assignment{Task: t.ID, Slot: t.Slot, SpecVersion: t.SpecVersion, Desired: t.Desired, State: t.Status.State}
	if svc := st.Service(t.Service); svc != nil {
		a.Service = svc.Spec.Name
	}
	for _, at := range t.Attachments {
		ip := netip.AddrFrom4([4]byte{byte(at.Addr >> 24), byte(at.Addr >> 16), byte(at.Addr >> 8), byte(at.Addr)})
		addr := wire.Address{Addr: ip.String()}
		if p := st.Pool(at.Network); p != nil {
			addr.Addr = netip.PrefixFrom(ip, p.Prefix().Bits()).String()
		}
		if nw := st.Network(at.Network); nw != nil {
			addr.Network = nw.Name
		}
		a.Addresses = append(a.Addresses, addr)
	}
	return a
}

// wake answers the parked polls that have news or whose wait ended.
func (m *manager) wake() {
	if len(m.parked) == 0 {
		return
	}
	now := m.w.clk.Now()
	kept := m.parked[:0]
	var ready []*parkedPoll
	for _, p := range m.parked {
		if m.news(p.req.NodeID, p.req.Cursor) || !now.Before(p.until) {
			ready = append(ready, p)
			continue
		}
		kept = append(kept, p)
	}
	clear(m.parked[len(kept):])
	m.parked = kept
	for _, p := range ready {
		if m.news(p.req.NodeID, p.req.Cursor) {
			p.reply(m.complete(p.r, p.req.NodeID), nil)
			continue
		}
		p.reply(&wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: p.req.Cursor, ResultsIn: p.req.Cursor}, nil)
	}
}

// crash forgets everything the managers kept in memory: the parked polls
// end without an answer (their connections broke).
func (m *manager) crash() {
	for _, p := range m.parked {
		p.reply(nil, errConnection)
	}
	m.parked = nil
}
