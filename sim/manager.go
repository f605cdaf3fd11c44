package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"shoal/cluster"
	"shoal/engine/duty"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// JournalSize is each replica's per-node assignment journal (the least
// control.NewFeed keeps): small, so an agent away for a while, or a
// replica restored from a snapshot, meets a resync.
const JournalSize = 16

// manager is the managers' side of the agent protocol: on each replica a
// control.Agents over that replica's view of the groups, with its own
// change feed fed by what the replica applies. Each call is served by
// the replica the network chose; the node monitor (the leader's duty)
// answers heartbeats on the leader only.
//
// An assignments long poll is never blocked on: the stream is asked with
// no wait, and a poll with nothing new is parked here and asked again
// after every event until it gets news or its wait ends.
type manager struct {
	w      *World
	agents []*control.Agents // per replica
	feeds  []*control.Feed   // per replica
	sids   uint64
	parked []*parkedPoll
	// leaderCh is closed when the leader changes (control.Leaders'
	// LeaderNotice); leaders counts the changes.
	leaderCh chan struct{}
	leaders  uint64
	// applies counts, per replica, the entries its feed took (each closes
	// the feed's Changed channel): a parked poll compares counts instead
	// of selecting on channels after every event.
	applies []uint64
}

type parkedPoll struct {
	r     int
	req   *wire.AssignmentsRequest
	until time.Time
	reply func(wire.Message, error)
	// applies and leaders are the counts when the poll last asked.
	applies, leaders uint64
}

// stirred reports whether p is worth asking again: its replica applied a
// change, or the leader changed, since it last asked.
func (m *manager) stirred(p *parkedPoll) bool {
	return m.applies[p.r] != p.applies || m.leaders != p.leaders
}

// applied tells replica r's feed about an entry r applied.
func (m *manager) applied(r, g int, index uint64, effs []statemachine.Effect) {
	m.applies[r]++
	m.feeds[r].OnApply(g, index, effs)
}

func newManager(w *World) *manager {
	m := &manager{w: w, leaderCh: make(chan struct{}), applies: make([]uint64, w.cfg.Replicas)}
	m.agents = make([]*control.Agents, w.cfg.Replicas)
	m.feeds = make([]*control.Feed, w.cfg.Replicas)
	for r := range w.cfg.Replicas {
		m.restart(r)
	}
	return m
}

// restart gives replica r a fresh protocol: a new feed from what the
// replica applied, no session record, no parked poll (a manager process
// restarting).
func (m *manager) restart(r int) {
	start := make([]uint64, len(m.w.gs.g))
	for g := range m.w.gs.g {
		m.w.gs.read(r, g, func(st *statemachine.State) { start[g] = st.LastIndex() })
	}
	m.feeds[r] = control.NewFeed(m.w.cfg.Groups, start, 4096, JournalSize)
	cfg := control.AgentsConfig{Cluster: m.w.view(r), Leaders: leaders{m.w, r}, Self: leaders{m.w, r},
		Feed: m.feeds[r], Monitor: monitorOn{m.w, r}, Clock: m.w.clk, SyncInterval: m.w.cfg.SyncInterval,
		SessionIDs: func() uint64 { m.sids++; return uint64(r+1)<<32 | m.sids<<1 | 1 }, Sequential: true}
	if m.w.plants.control != nil {
		m.w.plants.control(&cfg)
	}
	m.agents[r] = control.NewAgents(cfg)
	kept := m.parked[:0]
	for _, p := range m.parked {
		if p.r == r {
			p.reply(nil, errConnection)
			continue
		}
		kept = append(kept, p)
	}
	m.parked = kept
}

// elected tells the protocol the leader changed.
func (m *manager) elected() {
	close(m.leaderCh)
	m.leaderCh = make(chan struct{})
	m.leaders++
}

// wireErr is the answer to a call that failed: a *wire.Error as it is,
// any other (the cluster's) as unavailable, which the agent retries, as
// an agent in process takes it.
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
	a := m.agents[r]
	var resp wire.Message
	var err error
	switch q := req.(type) {
	case *wire.SessionRequest:
		resp, err = a.OpenSession(ctx, q)
	case *wire.Heartbeat:
		resp, err = a.Heartbeat(ctx, q)
	case *wire.StatusBatch:
		resp, err = a.ReportStatus(ctx, q)
	case *wire.SyncRequest:
		resp, err = a.Sync(ctx, q)
	case *wire.AssignmentsRequest:
		applies := m.applies[r]
		f, err := m.poll(r, q)
		if err == nil && f == nil {
			m.parked = append(m.parked, &parkedPoll{r: r, req: q, until: m.w.clk.Now().Add(time.Duration(q.Wait)), reply: reply,
				applies: applies, leaders: m.leaders})
			m.w.clk.AfterFunc(time.Duration(q.Wait), func() {}) // the loop looks again when the wait ends
			return
		}
		if err != nil {
			reply(nil, wireErr(err))
			return
		}
		reply(f, nil)
		return
	default:
		err = &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf("no such call: %T", req)}
	}
	if err != nil {
		reply(nil, wireErr(err))
		return
	}
	reply(resp, nil)
}

// poll asks replica r's stream without waiting: nil, nil when it has
// nothing new for a poll that may wait.
func (m *manager) poll(r int, q *wire.AssignmentsRequest) (*wire.Assignments, error) {
	now := *q
	now.Wait = 0
	f, err := m.agents[r].Assignments(context.Background(), &now)
	if err != nil {
		return nil, err
	}
	if q.Wait > 0 && f.Kind == wire.FrameIncremental && !f.Resync && len(f.Tasks) == 0 && len(f.Removed) == 0 &&
		len(f.Specs) == 0 && sameCursor(f.ResultsIn, q.Cursor) {
		return nil, nil
	}
	return f, nil
}

func sameCursor(a, b wire.Cursor) bool {
	for g := range max(len(a), len(b)) {
		if a.Get(g) != b.Get(g) {
			return false
		}
	}
	return true
}

// wake answers the parked polls that have news or whose wait ended.
func (m *manager) wake() {
	if len(m.parked) == 0 {
		return
	}
	now := m.w.clk.Now()
	due := false
	for _, p := range m.parked {
		if !now.Before(p.until) || m.stirred(p) {
			due = true
			break
		}
	}
	if !due {
		return
	}
	parked := m.parked
	m.parked = nil
	for _, p := range parked {
		expired := !now.Before(p.until)
		if !expired && !m.stirred(p) {
			m.parked = append(m.parked, p)
			continue
		}
		p.applies, p.leaders = m.applies[p.r], m.leaders
		f, err := m.poll(p.r, p.req)
		switch {
		case err != nil:
			p.reply(nil, wireErr(err))
		case f != nil:
			p.reply(f, nil)
		case expired:
			p.reply(&wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: p.req.Cursor, ResultsIn: p.req.Cursor}, nil)
		default:
			m.parked = append(m.parked, p)
		}
	}
}

// crash forgets everything the managers kept in memory.
func (m *manager) crash() {
	for r := range m.agents {
		m.restart(r)
	}
}

// leaders is control's view of the groups' leaders from replica r: the
// cluster group's leader runs every group's leadership here; every
// replica is in contact with the quorum (the managers are never cut off
// from each other).
type leaders struct {
	w *World
	r int
}

func (l leaders) Leader(int) (uint64, bool) { return uint64(l.w.leader + 1), true }
func (l leaders) LeaderNotice(int) (uint64, <-chan struct{}) {
	return uint64(l.w.leader + 1), l.w.manager.leaderCh
}
func (l leaders) Contact(int) cluster.Contact {
	return cluster.Contact{Leading: l.w.leader == l.r, OK: true}
}
func (l leaders) ReplicaID() uint64 { return uint64(l.r + 1) }
func (l leaders) Leading() bool     { return l.w.leader == l.r }

// monitorOn is the node monitor duty as replica r's protocol sees it: it
// runs only while r leads.
type monitorOn struct {
	w *World
	r int
}

func (x monitorOn) duty() (*duty.MonitorDuty, error) {
	if x.w.leader != x.r || x.w.mon == nil {
		return nil, cluster.ErrNotMonitoring
	}
	return x.w.mon, nil
}

func (x monitorOn) Heartbeat(ctx context.Context, node statemachine.NodeID, now time.Time) (time.Duration, error) {
	d, err := x.duty()
	if err != nil {
		return 0, err
	}
	b, err := d.Heartbeat(ctx, node, now)
	return b.TTL, err
}

func (x monitorOn) Period(nodes int) time.Duration {
	if x.w.mon == nil {
		return time.Second
	}
	return x.w.mon.Period(nodes)
}

func (x monitorOn) NodeStatus(node statemachine.NodeID) (statemachine.NodeStatus, bool) {
	d, err := x.duty()
	if err != nil {
		return 0, false
	}
	return d.NodeStatus(node)
}

func (x monitorOn) MarkReReported(node statemachine.NodeID) bool {
	d, err := x.duty()
	if err != nil {
		return false
	}
	return d.MarkReReported(node)
}
