package control

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"shoal/cluster"
	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Cluster is what the agent protocol needs of the replicated groups as
// one manager replica sees them: the sync fan-out's reads and per-group
// commits (Groups), and the submitter users' and agents' commands go
// through (duty.Submitter over the engine or over duty.Memory has all of
// these methods).
type Cluster interface {
	Groups
	Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
	SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome
	SubmitBeforeFanout(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
}

// Self says which replica this is and whether it leads the cluster group
// (the engine implements it).
type Self interface {
	ReplicaID() uint64
	Leading() bool
}

// Monitor is the node monitor as the agent protocol sees it, on the
// cluster group's leader. Heartbeat records a node's heartbeat at now and
// returns how long the node may wait before its next one; it fails with
// cluster.ErrNotMonitoring (not the leader), cluster.ErrMonitorStarting
// (just elected, retry here) or cluster.ErrUnknownNode. Period is the
// heartbeat period for a cluster of that many nodes, NodeStatus a node's
// status as the monitor holds it, MarkReReported records that an
// initializing node re-reported its tasks (false if the node is not known
// or not initializing).
type Monitor interface {
	Heartbeat(ctx context.Context, node statemachine.NodeID, now time.Time) (ttl time.Duration, err error)
	Period(nodes int) time.Duration
	NodeStatus(node statemachine.NodeID) (statemachine.NodeStatus, bool)
	MarkReReported(node statemachine.NodeID) bool
}

// AgentsConfig configures Agents.
type AgentsConfig struct {
	Cluster Cluster // required
	Leaders Leaders // required
	Self    Self    // required
	Feed    *Feed   // required; its OnApply wired into the cluster's apply hook
	// Monitor is the node monitor while this replica runs it; nil: none
	// here (heartbeats and re-reports are sent to the leader).
	Monitor Monitor
	// Link carries heartbeats this replica relays to the leader while it
	// follows (relay.go). Nil: a follower refuses heartbeats (not_leader
	// naming the leader), as the in-process agents and the simulation
	// expect.
	Link LeaderLink
	// Relay tunes the relay; zero values take RelayConfig's defaults.
	Relay RelayConfig
	// Clock stamps heartbeats and times long polls. Default: the wall
	// clock.
	Clock clock.Clock
	// SyncInterval is pushed to agents at session start. Default 1m.
	SyncInterval time.Duration
	// SessionIDs draws a new session's ID (odd, never 0). Default: random.
	SessionIDs func() uint64
	// Logf gets the stream's lines (contact with the quorum lost and
	// regained). Default: discard.
	Logf func(format string, args ...any)
	// Logs is the log broker whose notices the assignment stream hands
	// the nodes (logs.go). Default: a broker of its own, which no
	// subscription reaches.
	Logs *LogBroker
	// Sequential visits the groups one after another, in group order,
	// where a call reads or commits in several (a sync, a COMPLETE's read
	// barriers), instead of concurrently: a deterministic simulation
	// sees the same calls in the same order every run. Default false.
	Sequential bool

	seams seams // seeded bugs (-tags shoal_seams: PlantBug)
}

// Agents is the manager's side of the agent protocol on one replica, in
// process: its methods are those of agent.Manager, so an agent runs
// against it without HTTP, and the API's agent endpoints call them
// between decoding and encoding. Refusals are *wire.Error values the API
// sends as they are; any other error is the cluster's (the API maps it
// through its error table; an agent in process takes it as a transport
// error and retries). The caller checks that a request's node is the
// caller's. Safe for concurrent use.
type Agents struct {
	cfg    AgentsConfig
	stream *Stream
	relay  *relay // nil without a Link
}

// NewAgents returns the agent protocol over cfg's cluster.
func NewAgents(cfg AgentsConfig) *Agents {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = time.Minute
	}
	if cfg.SessionIDs == nil {
		cfg.SessionIDs = rand.Uint64
	}
	a := &Agents{cfg: cfg, stream: newStream(streamConfig{Reads: cfg.Cluster, Leaders: cfg.Leaders, Feed: cfg.Feed,
		Clock: cfg.Clock, Logf: cfg.Logf, Sequential: cfg.Sequential, Logs: cfg.Logs, bugs: cfg.seams})}
	if cfg.Link != nil {
		a.relay = newRelay(a, cfg.Link, cfg.Relay)
	}
	return a
}

// Stream returns the assignment stream (its counts, its quorum check).
func (a *Agents) Stream() *Stream { return a.stream }

// OpenSession registers the request's node (OpenSession, the package
// function) and opens a session for it here: its ID, the heartbeat period
// the monitor hands a cluster of this many nodes (1s without a monitor
// here), the sync interval, the managers and the number of service
// groups.
func (a *Agents) OpenSession(ctx context.Context, req *wire.SessionRequest) (*wire.Session, error) {
	opened, err := OpenSession(ctx, a.cfg.Cluster, req)
	if err != nil {
		return nil, err
	}
	sid := a.cfg.SessionIDs() | 1
	a.stream.Open(sid, opened.Node)
	// The period the monitor hands this many nodes: the session's first
	// heartbeats wait that long for their answer, so a fleet joining a
	// big cluster at once does not give up on a busy leader after a
	// second and dial it again (each heartbeat that timed out closed its
	// connection, and the next one cost the leader a TLS handshake).
	period := time.Second
	if a.cfg.Monitor != nil {
		period = a.cfg.Monitor.Period(opened.Nodes)
	}
	return &wire.Session{NodeID: opened.Node, SessionID: sid, HeartbeatPeriod: int64(period),
		SyncInterval: int64(a.cfg.SyncInterval), Managers: opened.Managers, Groups: uint16(a.cfg.Cluster.Groups())}, nil
}

// Heartbeat records the node's heartbeat with the node monitor and
// answers the node's next period and status. Where the monitor does not
// run, a replica with a Link relays the heartbeat to the leader and
// answers what the leader answered (relay.go); when it knows no leader it
// answers unavailable (retry), and when the relay got no answer
// unavailable (retry here) if the leader answered another batch within a
// period, else not_leader naming the leader; while the leadership moves
// (no leader known, or a leader that was answering stopped) it holds the
// heartbeat for the relay's wait until a leader is known and answers
// (relayBeat). Without a Link it answers not_leader naming the leader (if
// it knows one). On a leader whose monitor is
// starting it answers unavailable (retry here); a node the monitor does
// not know is removed (node_removed) or not applied here yet
// (unavailable, retry).
func (a *Agents) Heartbeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	ack, here, err := a.monitorBeat(ctx, hb)
	if a.relay == nil || here {
		return ack, err
	}
	return a.relayBeat(ctx, hb)
}

// monitorBeat is Heartbeat on this replica's node monitor, never relayed:
// where the monitor does not run it answers not_leader and here false.
func (a *Agents) monitorBeat(ctx context.Context, hb *wire.Heartbeat) (ack *wire.HeartbeatAck, here bool, err error) {
	ack, err = a.monitorBeatHere(ctx, hb)
	if err == error(errNotHere) {
		return nil, false, a.notLeader()
	}
	return ack, true, err
}

// errNotHere is monitorBeatHere's answer where the monitor does not run.
var errNotHere = &wire.Error{Code: wire.CodeNotLeader}

func (a *Agents) monitorBeatHere(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	mon := a.cfg.Monitor
	if mon == nil {
		return nil, errNotHere
	}
	ttl, err := mon.Heartbeat(ctx, hb.NodeID, a.cfg.Clock.Now())
	switch {
	case errors.Is(err, cluster.ErrMonitorStarting):
		return nil, Starting()
	case errors.Is(err, cluster.ErrNotMonitoring):
		return nil, errNotHere
	case errors.Is(err, cluster.ErrUnknownNode):
		removed := false
		_ = a.cfg.Cluster.ReadLocal(route.ClusterGroup, func(st *statemachine.State) { removed = st.NodeRemoved(hb.NodeID) })
		if removed {
			return nil, errRemoved()
		}
		// A new leader may not have applied the node's creation yet.
		return nil, &wire.Error{Code: wire.CodeUnavailable, Message: "the leader does not know this node yet; retry",
			RetryAfter: int64(500 * time.Millisecond)}
	case err != nil:
		return nil, err
	}
	st, _ := mon.NodeStatus(hb.NodeID)
	return &wire.HeartbeatAck{Period: int64(ttl), Status: st}, nil
}

// leadsHere reports whether the cluster group's leader is this replica.
func (a *Agents) leadsHere() bool {
	id, ok := a.cfg.Leaders.Leader(route.ClusterGroup)
	return ok && id == a.cfg.Self.ReplicaID()
}

// Assignments is the stream's long poll (Stream.Assignments).
func (a *Agents) Assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error) {
	return a.stream.Assignments(ctx, req)
}

// ReportStatus submits a status batch (SubmitStatus); a re-report that
// reaches a replica not running the node monitor is answered as a
// heartbeat there is (not_leader, or a retry on the leader).
func (a *Agents) ReportStatus(ctx context.Context, b *wire.StatusBatch) (*wire.StatusAck, error) {
	ack, err := SubmitStatus(ctx, a.cfg.Cluster, reReports{a}, b)
	if errors.Is(err, cluster.ErrNotMonitoring) {
		// The re-report marker must reach the node monitor, which runs on
		// the leader only.
		return nil, a.notLeader()
	}
	return ack, err
}

// reReports gives status submission the node monitor while this replica
// leads.
type reReports struct{ a *Agents }

func (r reReports) Monitoring() bool { return r.a.cfg.Monitor != nil && r.a.cfg.Self.Leading() }

func (r reReports) MarkReReported(node statemachine.NodeID) bool {
	return r.a.cfg.Monitor.MarkReReported(node)
}

// Sync runs the sync fan-out (Sync, the package function).
func (a *Agents) Sync(ctx context.Context, req *wire.SyncRequest) (*wire.SyncAnswer, error) {
	destroy, err := syncFanOut(ctx, a.cfg.Cluster, req, a.cfg.Sequential, a.cfg.seams)
	if err != nil {
		return nil, err
	}
	return &wire.SyncAnswer{Destroy: destroy}, nil
}

// SetManagers does nothing: in process there is one manager to call.
func (a *Agents) SetManagers([]string) {}

// leaderAddr returns the API address of the cluster group's leader, if
// known.
func (a *Agents) leaderAddr() string {
	id, ok := a.cfg.Leaders.Leader(route.ClusterGroup)
	if !ok {
		return ""
	}
	return a.stream.managerAddr(id)
}

// notLeader answers a call only the cluster's leader takes, naming the
// leader. A replica that leads but has not started its leader duties yet
// (they start on the election's notification; the node monitor then
// reads the node list) asks for a retry here instead of naming itself:
// the agent's client would follow that back here twice at once and count
// the call failed.
func (a *Agents) notLeader() *wire.Error {
	if id, ok := a.cfg.Leaders.Leader(route.ClusterGroup); ok && id == a.cfg.Self.ReplicaID() {
		return Starting()
	}
	return &wire.Error{Code: wire.CodeNotLeader, Leader: a.leaderAddr(), RetryAfter: int64(200 * time.Millisecond),
		Message: "this manager does not lead the cluster; send heartbeats to the leader"}
}

// Starting answers a call that reached the cluster's new leader before
// its leader duties started: retry here shortly.
func Starting() *wire.Error {
	return &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(100 * time.Millisecond), Message: startingMessage}
}

// startingMessage is Starting's text, by which a follower tells that
// answer of a new leader to a relayed heartbeat from the others.
const startingMessage = "this manager was just elected leader and is starting to monitor nodes; retry shortly"
