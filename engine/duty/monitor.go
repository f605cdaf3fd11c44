package duty

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"shoal/cluster"
	"shoal/engine/monitor"
	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
)

// The node monitor duty is the leader-only adapter around monitor.Monitor
// (the pure heartbeat table): on leadership it tracks every node of the
// cluster group with its replicated status and calls BecomeLeader; every
// Interval it re-syncs the node list (new nodes tracked, removed ones
// forgotten, statuses another component changed corrected), looks up which
// expiring nodes hold tasks with a disconnect window (read before taking
// its lock, handed to the monitor as data), Ticks, and proposes the
// changes: CmdSetNodeStatus (fanned out to every group; a disconnected
// node none of whose tasks has a live disconnect window left goes down)
// and, for a node
// down past the orphan timeout, CmdOrphanNode to every service group (its
// assigned..running tasks orphaned, its quarantine freed; repeated at the
// next tick if a group did not apply it). Heartbeat and MarkReReported are the
// agents' entry points (through the API); a heartbeat that changes a
// node's status returns once the change is applied on this replica.
//
// The monitor is guarded by a mutex (the duty's goroutine against heartbeat
// callers); proposals and reads are made without it, so heartbeats never
// wait for a tick's Raft round trip. A node with a status proposal in
// flight is not re-synced from the replicated state until it finished.

// MonitorConfig tunes the node monitor duty. Zero values take the defaults
// named on each field.
type MonitorConfig struct {
	// Monitor configures the heartbeat table (TTLs, grace, failover grace,
	// orphan timeout); its Disconnectable is replaced by the set of nodes
	// the duty found holding tasks with a disconnect window
	// (statemachine.State.HasDisconnectWindow in any service group).
	Monitor monitor.Config
	// Interval is the time between ticks, on Clock. Default 1s.
	Interval time.Duration
	// Clock times ticks and stamps heartbeats' decisions. Default:
	// clock.Real (manager.Start passes the engine's clock).
	Clock clock.Clock
	// Logf receives proposal failures. Default: discard.
	Logf func(format string, args ...any)
}

func (c MonitorConfig) withDefaults() MonitorConfig {
	setDefault(&c.Interval, time.Second)
	defaults(&c.Clock, &c.Logf)
	return c
}

// ErrNotMonitoring: this replica's node monitor is not running (it is not
// the cluster group's leader, or has not loaded the node list yet); send the
// heartbeat to the leader, or retry shortly.
var ErrNotMonitoring = cluster.ErrNotMonitoring

// MonitorDuty is the node monitor duty; its methods are safe for concurrent
// use.
type MonitorDuty struct {
	c   Cluster
	cfg MonitorConfig

	mu struct {
		sync.Mutex
		m *monitor.Monitor
		// inflight counts status proposals per node not finished yet.
		inflight map[statemachine.NodeID]int
		// disconnectable is the set the next Tick consults.
		disconnectable map[statemachine.NodeID]bool
		// windowOpen: the disconnected nodes that still hold a task with
		// a live disconnect window, for the next Tick.
		windowOpen map[statemachine.NodeID]bool
		// heldSince is the mass-expiry hold logged last (0: none).
		heldSince int64
		// starting is closed when the term Run is starting leads (or Run
		// ends first); nil when no Run is loading the node list.
		starting chan struct{}
	}
}

// NewMonitorDuty returns the node monitor duty over c. It fails only on a
// bad monitor configuration.
func NewMonitorDuty(c Cluster, cfg MonitorConfig) (*MonitorDuty, error) {
	d := &MonitorDuty{c: c, cfg: cfg.withDefaults()}
	mc := d.cfg.Monitor
	mc.Disconnectable = func(n statemachine.NodeID) bool { return d.mu.disconnectable[n] } // under d.mu, from Tick
	mc.WindowOpen = func(n statemachine.NodeID) bool { return d.mu.windowOpen[n] }         // likewise
	m, err := monitor.New(mc)
	if err != nil {
		return nil, err
	}
	d.mu.m = m
	d.mu.inflight = make(map[statemachine.NodeID]int)
	return d, nil
}

// nodeRow is a node's replicated status, copied out of the state.
type nodeRow struct {
	id     statemachine.NodeID
	status statemachine.NodeStatus
	since  int64
}

// rowOf copies a node's replicated status.
func rowOf(n *statemachine.Node) nodeRow {
	return nodeRow{id: n.ID, status: n.Status, since: n.StatusAt}
}

// readNodes reads the cluster group's nodes; linearizable when fresh.
func (d *MonitorDuty) readNodes(ctx context.Context, fresh bool) ([]nodeRow, error) {
	var rows []nodeRow
	fn := func(s *statemachine.State) {
		for _, id := range s.NodeIDs() {
			rows = append(rows, rowOf(s.Node(id)))
		}
	}
	var err error
	if fresh {
		err = d.c.Read(ctx, route.ClusterGroup, fn)
	} else {
		err = d.c.ReadLocal(route.ClusterGroup, fn)
	}
	return rows, err
}

// readRows reads the given nodes' rows from this replica's cluster group
// state; gone lists those it no longer has.
func (d *MonitorDuty) readRows(ids []statemachine.NodeID) (rows []nodeRow, gone []statemachine.NodeID, err error) {
	err = d.c.ReadLocal(route.ClusterGroup, func(s *statemachine.State) {
		for _, id := range ids {
			if n := s.Node(id); n != nil {
				rows = append(rows, rowOf(n))
			} else {
				gone = append(gone, id)
			}
		}
	})
	return rows, gone, err
}

// BecomeLeader tracks every node (a linearizable read: everything the last
// term committed) and starts the monitor's term. Scenario scripts call it
// for a leader change; Run starts from the applied list (lead) and
// catches up.
func (d *MonitorDuty) BecomeLeader(ctx context.Context) error {
	_, err := d.lead(ctx, true)
	return err
}

// lead tracks every node of the cluster group's state (read
// linearizably when fresh, else as applied here), starts the monitor's
// term, and returns the rows it read.
func (d *MonitorDuty) lead(ctx context.Context, fresh bool) ([]nodeRow, error) {
	rows, err := d.readNodes(ctx, fresh)
	if err != nil {
		return nil, fmt.Errorf("load nodes: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	d.syncLocked(rows, now)
	d.mu.m.BecomeLeader(now)
	return rows, nil
}

// Sync re-reads the cluster group's nodes into the monitor now (Tick does
// it every Interval), so a node another component created or changed is
// tracked with its replicated status at once.
func (d *MonitorDuty) Sync(ctx context.Context) error {
	rows, err := d.readNodes(ctx, false)
	if err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncLocked(rows, d.now())
	return nil
}

// StepDown ends the monitor's term: heartbeats get ErrNotMonitoring until
// the next BecomeLeader.
func (d *MonitorDuty) StepDown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.m.StepDown()
}

// syncLocked makes the monitor's node list and statuses match rows (every
// node), except for nodes with a status proposal in flight.
func (d *MonitorDuty) syncLocked(rows []nodeRow, now int64) {
	seen := make(map[statemachine.NodeID]bool, len(rows))
	for _, r := range rows {
		seen[r.id] = true
	}
	var gone []statemachine.NodeID
	for _, id := range d.mu.m.Nodes() {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	d.resyncLocked(rows, gone, now)
}

// resyncLocked tracks the nodes of rows at their replicated status and
// forgets the gone ones, leaving nodes with a status proposal in flight
// as they are.
func (d *MonitorDuty) resyncLocked(rows []nodeRow, gone []statemachine.NodeID, now int64) {
	for _, r := range rows {
		if d.mu.inflight[r.id] == 0 {
			d.mu.m.Track(r.id, r.status, r.since, now)
		}
	}
	for _, id := range gone {
		if d.mu.inflight[id] == 0 {
			d.mu.m.Forget(id)
		}
	}
}

func (d *MonitorDuty) now() int64 { return d.cfg.Clock.Now().UnixNano() }

// Tick re-syncs the node list, ticks the monitor at the clock's time and
// proposes its changes. Run calls it every Interval.
func (d *MonitorDuty) Tick(ctx context.Context) error {
	rows, err := d.readNodes(ctx, false)
	if err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	d.mu.Lock()
	now := d.now()
	d.syncLocked(rows, now)
	expiring := d.mu.m.Expiring(now, nil)
	away := d.mu.m.Disconnected(now, nil)
	d.mu.Unlock()
	disc := d.disconnectable(expiring)
	open := d.windowOpen(away, now)

	d.mu.Lock()
	d.mu.disconnectable, d.mu.windowOpen = disc, open
	changes := append([]monitor.Change(nil), d.mu.m.Tick(now)...)
	d.mu.disconnectable, d.mu.windowOpen = nil, nil
	d.beginLocked(changes)
	d.logBrakeLocked()
	d.mu.Unlock()
	if len(changes) == 0 {
		return nil
	}
	return d.propose(ctx, changes)
}

// disconnectable returns which of nodes hold a live task of a service with
// a disconnect window in some service group, as this replica has applied.
func (d *MonitorDuty) disconnectable(nodes []statemachine.NodeID) map[statemachine.NodeID]bool {
	if len(nodes) == 0 {
		return nil
	}
	set := make(map[statemachine.NodeID]bool, len(nodes))
	for g := 1; g <= d.c.Groups(); g++ {
		_ = d.c.ReadLocal(g, func(s *statemachine.State) {
			for _, n := range nodes {
				if !set[n] && s.HasDisconnectWindow(n) {
					set[n] = true
				}
			}
		})
	}
	return set
}

// windowOpen returns which of the disconnected nodes still hold a task
// with a live disconnect window at now in some service group, as this
// replica has applied; the others are given up (they go down).
func (d *MonitorDuty) windowOpen(nodes []statemachine.NodeID, now int64) map[statemachine.NodeID]bool {
	if len(nodes) == 0 {
		return nil
	}
	set := make(map[statemachine.NodeID]bool, len(nodes))
	for g := 1; g <= d.c.Groups(); g++ {
		err := d.c.ReadLocal(g, func(s *statemachine.State) {
			for _, n := range nodes {
				if !set[n] && s.DisconnectWindowOpen(n, now) {
					set[n] = true
				}
			}
		})
		if err != nil {
			// A group not read may hold a live window: give nobody up.
			for _, n := range nodes {
				set[n] = true
			}
			return set
		}
	}
	return set
}

// beginLocked counts the status changes as in flight.
func (d *MonitorDuty) beginLocked(changes []monitor.Change) {
	for _, c := range changes {
		if c.Kind == monitor.ChangeStatus {
			d.mu.inflight[c.Node]++
		}
	}
}

// propose submits the status changes, then orphans the tasks of the nodes
// reported with ChangeOrphan. A status change that did not apply is
// corrected in the monitor from the replicated state, so the next tick
// decides again. It returns the first failure.
func (d *MonitorDuty) propose(ctx context.Context, changes []monitor.Change) error {
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	cmds := monitor.Commands(nil, changes)
	var outs []route.Outcome
	if len(cmds) > 0 {
		outs = d.c.SubmitMany(ctx, cmds)
	}
	failed := false
	for i, o := range outs {
		if err := o.Err(); err != nil {
			failed = true
			note(fmt.Errorf("set node %d %s: %w", cmds[i].Node, cmds[i].NodeStatus, err))
		}
	}
	d.finish(changes, failed)
	for _, c := range changes {
		if c.Kind == monitor.ChangeOrphan {
			if err := d.orphan(ctx, c.Node); err != nil {
				note(err)
			}
		}
	}
	return first
}

// finish ends the in-flight count of the status changes; after a failure
// it re-syncs the changed nodes from this replica's cluster group state.
// Only those: a fleet whose heartbeats' changes failed under load (each
// heartbeat of a reconnecting node proposes one) read the whole node table
// per failure and re-synced it under the monitor's lock, and every other
// heartbeat waited behind that lock until agents gave up on them.
func (d *MonitorDuty) finish(changes []monitor.Change, failed bool) {
	var ids []statemachine.NodeID
	for _, c := range changes {
		if c.Kind == monitor.ChangeStatus {
			ids = append(ids, c.Node)
		}
	}
	var rows []nodeRow
	var gone []statemachine.NodeID
	var err error
	if failed {
		rows, gone, err = d.readRows(ids)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if d.mu.inflight[id]--; d.mu.inflight[id] <= 0 {
			delete(d.mu.inflight, id)
		}
	}
	if failed && err == nil {
		d.resyncLocked(rows, gone, d.now())
	}
}

// orphan proposes CmdOrphanNode to every service group: node is past its
// orphan timeout. A group that does not know the node has nothing to do; a
// group that refused (its copy of the node is not down yet: the cluster
// group's outbox has not reached it) or could not be reached makes the
// monitor report the node again at its next tick.
func (d *MonitorDuty) orphan(ctx context.Context, node statemachine.NodeID) error {
	var first error
	for g := 1; g <= d.c.Groups(); g++ {
		res, err := d.c.SubmitToGroup(ctx, g, statemachine.Command{Kind: statemachine.CmdOrphanNode, Node: node})
		if err == nil || res.Code == statemachine.CodeNotFound {
			continue
		}
		if first == nil {
			first = fmt.Errorf("orphan node %d in group %d: %w", node, g, err)
		}
	}
	if first != nil {
		d.mu.Lock()
		d.mu.m.OrphanFailed(node)
		d.mu.Unlock()
	}
	return first
}

// Heartbeat records a heartbeat from node at now and returns the TTL the
// agent should use next. If the heartbeat changes the node's status
// (reconnect: disconnected or down → initializing; initializing → ready
// once re-reported), it returns once the change is applied on this
// replica, with the change in the Beat. A node created since the last tick
// is looked up in this replica's state. Errors: ErrNotMonitoring,
// monitor.ErrUnknownNode, or why the status change was not applied.
func (d *MonitorDuty) Heartbeat(ctx context.Context, node statemachine.NodeID, now time.Time) (monitor.Beat, error) {
	b, err := d.beat(node, now.UnixNano())
	if errors.Is(err, ErrNotMonitoring) {
		if err = d.awaitStart(ctx); err == nil {
			now = d.cfg.Clock.Now()
			b, err = d.beat(node, now.UnixNano())
		}
	}
	if errors.Is(err, monitor.ErrUnknownNode) {
		// A node that joined after this term began: read its row alone (a
		// fleet joining at once read the whole node table once per node).
		rows, _, rerr := d.readRows([]statemachine.NodeID{node})
		if rerr != nil {
			return monitor.Beat{}, fmt.Errorf("engine: heartbeat of node %d: %w", node, rerr)
		}
		d.mu.Lock()
		if len(rows) == 1 && d.mu.m.Leading() {
			d.mu.m.Track(rows[0].id, rows[0].status, rows[0].since, now.UnixNano())
		}
		d.mu.Unlock()
		b, err = d.beat(node, now.UnixNano())
	}
	if err != nil {
		return monitor.Beat{}, fmt.Errorf("engine: heartbeat of node %d: %w", node, err)
	}
	if !b.Changed {
		return b, nil
	}
	if err := d.propose(ctx, []monitor.Change{b.Change}); err != nil {
		return b, fmt.Errorf("engine: heartbeat of node %d: %w", node, err)
	}
	return b, nil
}

func (d *MonitorDuty) beat(node statemachine.NodeID, now int64) (monitor.Beat, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.m.Leading() {
		return monitor.Beat{}, ErrNotMonitoring
	}
	b, err := d.mu.m.Heartbeat(node, now)
	if err == nil && b.Changed {
		d.beginLocked([]monitor.Change{b.Change})
	}
	return b, err
}

// Period returns the heartbeat period (before jitter) this monitor hands
// a cluster of nodes: what a new session starts with, on any replica.
func (d *MonitorDuty) Period(nodes int) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.m.Config().BaseTTL(nodes)
}

// MarkReReported records that an initializing node re-reported its tasks:
// its next heartbeat makes it ready. It reports false if the node is not
// known or not initializing.
func (d *MonitorDuty) MarkReReported(node statemachine.NodeID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.m.MarkReReported(node)
}

// Config returns the heartbeat table's configuration with its defaults
// filled in.
func (d *MonitorDuty) Config() monitor.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.m.Config()
}

// NodeStatus returns the monitor's view of a node's status.
func (d *MonitorDuty) NodeStatus(node statemachine.NodeID) (statemachine.NodeStatus, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.m.Status(node)
}
