package cluster

import "errors"

// Errors of a command's or a read's way through Raft (the engine). They
// arrive wrapped with the group, the command or the path involved.
var (
	// ErrClosed: the engine closed before the command was applied here.
	ErrClosed = errors.New("engine: closed")
	// ErrTimeout: the command's entry was proposed but not seen applied in
	// time; it may or may not take effect. Check before resubmitting.
	ErrTimeout = errors.New("engine: proposal timed out; it may or may not have been applied")
	// ErrNotProposed: Raft kept refusing the entry (no leader, system busy)
	// until the deadline; the command was not applied.
	ErrNotProposed = errors.New("engine: proposal not accepted before the deadline; nothing was applied")
	// ErrRejected: Raft rejected the entry; nothing was applied.
	ErrRejected = errors.New("engine: proposal rejected by raft")
	// ErrNotReady: this replica is still loading the group (snapshot and
	// log replay after a start); try again shortly.
	ErrNotReady = errors.New("engine: group not loaded on this replica yet")
)

// Errors of a membership change.
var (
	// ErrMembership is wrapped by refused membership changes (a duplicate
	// ID or address, an ID that was removed, removing the last replica).
	ErrMembership = errors.New("engine: membership change refused")
	// ErrNoReplica: the replica named is not a member of the cluster.
	ErrNoReplica = errors.New("engine: no such replica")
	// ErrNoQuorum: a membership change found no leader with a quorum
	// before its deadline; nothing may have changed in that group.
	ErrNoQuorum = errors.New("engine: the group has no leader with a quorum")
)

// Errors of a heartbeat.
var (
	// ErrNotMonitoring: this replica's node monitor is not running (it is
	// not the cluster group's leader, or has not loaded the node list yet);
	// send the heartbeat to the leader, or retry shortly.
	ErrNotMonitoring = errors.New("engine: node monitor not running on this replica")
	// ErrMonitorStarting: this replica was just elected and its node
	// monitor is still loading the node list; retry shortly, here.
	ErrMonitorStarting = errors.New("engine: node monitor is starting on this replica")
	// ErrUnknownNode: the node monitor does not track the node (it was
	// removed, or a new leader has not applied its creation yet).
	ErrUnknownNode = errors.New("monitor: unknown node")
)
