package monitor

import (
	"fmt"
	"slices"
	"time"

	"shoal/internal/mix"
	"shoal/statemachine"
)

// ChangeKind says what a Change asks the caller to do.
type ChangeKind uint8

// Change kinds.
const (
	// ChangeStatus: propose Command(), a CmdSetNodeStatus From → To.
	ChangeStatus ChangeKind = iota + 1
	// ChangeOrphan: the node has been down for the orphan timeout; propose
	// CmdOrphan for each of its assigned..running tasks.
	ChangeOrphan
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeStatus:
		return "status"
	case ChangeOrphan:
		return "orphan"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one decision of the monitor, as data.
type Change struct {
	Kind ChangeKind
	Node statemachine.NodeID
	// From and To are the node's status before and after (ChangeStatus);
	// for ChangeOrphan both are down.
	From, To statemachine.NodeStatus
	// At is when the monitor decided (unix nanoseconds); for ChangeOrphan,
	// when the node went down.
	At int64
}

// Command returns the CmdSetNodeStatus to propose for a ChangeStatus (a
// CmdNop for other kinds: orphaning takes one command per task).
func (c Change) Command() statemachine.Command {
	if c.Kind != ChangeStatus {
		return statemachine.Command{Kind: statemachine.CmdNop}
	}
	return statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: c.Node, NodeStatus: c.To}
}

func (c Change) String() string {
	if c.Kind == ChangeOrphan {
		return fmt.Sprintf("n%d orphan", c.Node)
	}
	return fmt.Sprintf("n%d %s->%s", c.Node, c.From, c.To)
}

// Commands appends to dst the CmdSetNodeStatus of every ChangeStatus in cs,
// in order, and returns the extended slice.
func Commands(dst []statemachine.Command, cs []Change) []statemachine.Command {
	for _, c := range cs {
		if c.Kind == ChangeStatus {
			dst = append(dst, c.Command())
		}
	}
	return dst
}

// Beat is the answer to one heartbeat.
type Beat struct {
	// TTL is when the agent should heartbeat next.
	TTL time.Duration
	// Change is the status change the heartbeat causes (disconnected or
	// down → initializing; initializing → ready once re-reported or past
	// the re-report window); valid when Changed.
	Change  Change
	Changed bool
}

// entry is one node's row in the heartbeat table.
type entry struct {
	id     statemachine.NodeID
	status statemachine.NodeStatus
	// reReported: the caller saw the node re-report its tasks while
	// initializing (cleared whenever the status changes).
	reReported bool
	// orphanSent: ChangeOrphan was emitted for this down period.
	orphanSent bool
	beats      uint32 // heartbeats to this leader; seeds the jitter
	since      int64  // unix ns the status was entered
	deadline   int64  // unix ns the node expires without a heartbeat
}

// Monitor is the heartbeat table. Its zero value is not usable; call New.
type Monitor struct {
	cfg     Config
	index   map[statemachine.NodeID]int32 // node → position in rows
	rows    []entry
	leading bool
	// graceUntil: before it (unix ns) nothing expires or is orphaned.
	graceUntil int64
	changes    []Change // Tick's result, reused
	expiring   []int    // Tick's scratch: rows past their deadline
	brake      brake
}

// New returns an empty monitor that is not leading yet.
func New(cfg Config) (*Monitor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Monitor{cfg: cfg, index: make(map[statemachine.NodeID]int32)}, nil
}

// Config returns the monitor's configuration with defaults filled in.
func (m *Monitor) Config() Config { return m.cfg }

// Len returns the number of tracked nodes.
func (m *Monitor) Len() int { return len(m.rows) }

// Track adds a node, or updates its status to what the replicated state
// holds (since: when it entered that status, unix nanoseconds). Call it for
// every node when becoming leader, when a node is created, and whenever the
// replicated status differs from the monitor's (a proposal failed, another
// component changed it). A new node gets its grace from now to heartbeat.
func (m *Monitor) Track(node statemachine.NodeID, status statemachine.NodeStatus, since, now int64) {
	if i, ok := m.index[node]; ok {
		e := &m.rows[i]
		if e.status != status {
			e.setStatus(status, since)
		}
		return
	}
	m.index[node] = int32(len(m.rows))
	m.rows = append(m.rows, entry{id: node, status: status, since: since})
	e := &m.rows[len(m.rows)-1]
	e.deadline = max(now+m.grace(m.baseTTL()), m.graceUntil)
}

// Forget drops a node (it was removed from the cluster).
func (m *Monitor) Forget(node statemachine.NodeID) {
	i, ok := m.index[node]
	if !ok {
		return
	}
	last := int32(len(m.rows) - 1)
	if i != last {
		m.rows[i] = m.rows[last]
		m.index[m.rows[i].id] = i
	}
	m.rows = m.rows[:last]
	delete(m.index, node)
}

// Nodes returns the tracked nodes' IDs, in no particular order.
func (m *Monitor) Nodes() []statemachine.NodeID {
	ids := make([]statemachine.NodeID, len(m.rows))
	for i := range m.rows {
		ids[i] = m.rows[i].id
	}
	return ids
}

// Status returns the monitor's view of a node's status.
func (m *Monitor) Status(node statemachine.NodeID) (statemachine.NodeStatus, bool) {
	i, ok := m.index[node]
	if !ok {
		return 0, false
	}
	return m.rows[i].status, true
}

// BecomeLeader starts (or restarts) monitoring at now: nothing expires or
// is orphaned before now+FailoverGrace, every node's deadline moves to at
// least that, and what the previous term knew about re-reports and orphan
// reports is forgotten.
func (m *Monitor) BecomeLeader(now int64) {
	m.leading = true
	m.graceUntil = now + int64(m.cfg.FailoverGrace)
	m.brake = brake{}
	deadline := max(m.graceUntil, now+m.grace(m.baseTTL()))
	for i := range m.rows {
		e := &m.rows[i]
		e.deadline, e.reReported, e.orphanSent = deadline, false, false
	}
}

// StepDown stops monitoring: Tick reports nothing until BecomeLeader.
func (m *Monitor) StepDown() { m.leading = false }

// Leading reports whether the monitor is between BecomeLeader and StepDown.
func (m *Monitor) Leading() bool { return m.leading }

// Heartbeat records a heartbeat from node at now. It returns the TTL the
// agent should use next and the status change the heartbeat causes, if any
// (already applied to the monitor's view). An untracked node gets
// ErrUnknownNode. It allocates nothing.
func (m *Monitor) Heartbeat(node statemachine.NodeID, now int64) (Beat, error) {
	i, ok := m.index[node]
	if !ok {
		return Beat{}, ErrUnknownNode
	}
	e := &m.rows[i]
	e.beats++
	ttl := m.jitter(m.baseTTL(), node, e.beats)
	e.deadline = now + m.grace(ttl)
	b := Beat{TTL: ttl}
	to := e.status
	switch e.status {
	case statemachine.NodeDisconnected, statemachine.NodeDown:
		to = statemachine.NodeInitializing
	case statemachine.NodeInitializing:
		if e.reReported || now >= e.since+int64(m.reReportWindow()) {
			to = statemachine.NodeReady
		}
	}
	if to != e.status {
		b.Change = Change{Kind: ChangeStatus, Node: node, From: e.status, To: to, At: now}
		b.Changed = true
		e.setStatus(to, now)
	}
	return b, nil
}

// MarkReReported records that an initializing node has re-reported its
// tasks: its next heartbeat makes it ready. It reports false (and does
// nothing) if the node is unknown or not initializing.
func (m *Monitor) MarkReReported(node statemachine.NodeID) bool {
	i, ok := m.index[node]
	if !ok || m.rows[i].status != statemachine.NodeInitializing {
		return false
	}
	m.rows[i].reReported = true
	return true
}

// Tick returns, ordered by node ID, the nodes whose heartbeat expired by now
// (ready → disconnected or down, initializing → down), the disconnected
// nodes without a live disconnect window (→ down) and the nodes down for the
// orphan timeout, and applies the status changes to the monitor's view.
// The slice is reused by the next Tick. It reports nothing while not leading
// or within the failover grace, and allocates nothing when nothing changes.
func (m *Monitor) Tick(now int64) []Change {
	m.changes = m.changes[:0]
	if !m.leading || now < m.graceUntil {
		return m.changes
	}
	orphanAt := now - int64(m.cfg.OrphanTimeout)
	m.expiring = m.expiring[:0]
	for i := range m.rows {
		e := &m.rows[i]
		switch e.status {
		case statemachine.NodeReady, statemachine.NodeInitializing:
			if now >= e.deadline {
				m.expiring = append(m.expiring, i) // marked below, unless the brake holds them
			}
		case statemachine.NodeDisconnected:
			// Given up once none of its tasks has a live window left.
			if m.cfg.WindowOpen == nil || !m.cfg.WindowOpen(e.id) {
				m.changes = append(m.changes, Change{Kind: ChangeStatus, Node: e.id, From: e.status, To: statemachine.NodeDown, At: now})
				e.setStatus(statemachine.NodeDown, now)
			}
		case statemachine.NodeDown:
			if !e.orphanSent && e.since <= orphanAt {
				e.orphanSent = true
				m.changes = append(m.changes, Change{Kind: ChangeOrphan, Node: e.id,
					From: statemachine.NodeDown, To: statemachine.NodeDown, At: e.since})
			}
		}
	}
	if !m.holds(now, len(m.expiring)) {
		for _, i := range m.expiring {
			e := &m.rows[i]
			m.expired(now)
			// Only a ready node may become disconnected: an initializing
			// node that misses its heartbeat goes down (DESIGN.md), since
			// its reconnect already failed once.
			to := statemachine.NodeDown
			if e.status == statemachine.NodeReady && m.cfg.Disconnectable != nil && m.cfg.Disconnectable(e.id) {
				to = statemachine.NodeDisconnected
			}
			m.changes = append(m.changes, Change{Kind: ChangeStatus, Node: e.id, From: e.status, To: to, At: now})
			e.setStatus(to, now)
		}
	}
	if len(m.changes) > 1 {
		slices.SortFunc(m.changes, func(a, b Change) int {
			switch {
			case a.Node < b.Node:
				return -1
			case a.Node > b.Node:
				return 1
			}
			return int(a.Kind) - int(b.Kind)
		})
	}
	return m.changes
}

// OrphanFailed tells the monitor that orphaning node (after its
// ChangeOrphan) did not apply everywhere; the next Tick reports it again
// while the node is still down. Orphaning is idempotent, so repeating it is
// safe.
func (m *Monitor) OrphanFailed(node statemachine.NodeID) {
	if i, ok := m.index[node]; ok && m.rows[i].status == statemachine.NodeDown {
		m.rows[i].orphanSent = false
	}
}

// Expiring appends to dst the ready nodes whose heartbeat has expired by
// now: the nodes the next Tick(now) asks Config.Disconnectable about, so
// the caller can look up which of them hold tasks with a disconnect window
// before calling Tick. It appends nothing while Tick would report nothing.
func (m *Monitor) Expiring(now int64, dst []statemachine.NodeID) []statemachine.NodeID {
	if !m.leading || now < m.graceUntil {
		return dst
	}
	for i := range m.rows {
		if e := &m.rows[i]; e.status == statemachine.NodeReady && now >= e.deadline {
			dst = append(dst, e.id)
		}
	}
	return dst
}

// Disconnected appends to dst the disconnected nodes: the nodes the next
// Tick asks Config.WindowOpen about. It appends nothing while Tick would
// report nothing.
func (m *Monitor) Disconnected(now int64, dst []statemachine.NodeID) []statemachine.NodeID {
	if !m.leading || now < m.graceUntil {
		return dst
	}
	for i := range m.rows {
		if e := &m.rows[i]; e.status == statemachine.NodeDisconnected {
			dst = append(dst, e.id)
		}
	}
	return dst
}

// reReportWindow is Config.ReReportWindow, or two base TTLs.
func (m *Monitor) reReportWindow() time.Duration {
	if m.cfg.ReReportWindow > 0 {
		return m.cfg.ReReportWindow
	}
	return 2 * m.baseTTL()
}

// TTL returns the base TTL (before jitter) for the current node count.
func (m *Monitor) TTL() time.Duration { return m.baseTTL() }

func (e *entry) setStatus(s statemachine.NodeStatus, since int64) {
	e.status, e.since = s, since
	e.reReported, e.orphanSent = false, false
}

// baseTTL is the base TTL for the tracked nodes.
func (m *Monitor) baseTTL() time.Duration { return m.cfg.BaseTTL(len(m.rows)) }

// BaseTTL is the base TTL (before jitter) for a cluster of nodes:
// nodes/TargetRate seconds, clamped to [MinTTL, MaxTTL]. Call it on a
// Config with its defaults filled in (Monitor.Config).
func (c Config) BaseTTL(nodes int) time.Duration {
	ttl := c.MaxTTL
	if c.TargetRate > 0 {
		secs := float64(nodes) / c.TargetRate
		if secs < c.MaxTTL.Seconds() {
			ttl = time.Duration(secs * float64(time.Second))
		}
	}
	return min(max(ttl, c.MinTTL), c.MaxTTL)
}

// jitter adds up to Jitter × base, derived from (seed, node, beat).
func (m *Monitor) jitter(base time.Duration, node statemachine.NodeID, beat uint32) time.Duration {
	if m.cfg.Jitter == 0 {
		return base
	}
	h := mix.Mix64(m.cfg.Seed ^ uint64(node)<<32 ^ uint64(beat))
	u := float64(h>>11) / (1 << 53) // [0, 1)
	return base + time.Duration(u*m.cfg.Jitter*float64(base))
}

// grace is how long a node may stay silent after being handed ttl.
func (m *Monitor) grace(ttl time.Duration) int64 {
	return int64(m.cfg.GraceFactor * float64(ttl))
}
