package engine

import "errors"

// The engine's sentinel errors, in one place. Match them with errors.Is;
// they arrive wrapped with the group, the command or the path involved.
var (
	// ErrClosed: the engine closed before the command was applied here.
	ErrClosed = errors.New("engine: closed")
	// ErrTimeout: the command's entry was proposed but not seen applied in
	// time; it may or may not take effect. Check before resubmitting.
	ErrTimeout = errors.New("engine: proposal timed out; it may or may not have been applied")
	// ErrNotProposed: dragonboat kept refusing the entry (no leader, system
	// busy) until the deadline; the command was not applied.
	ErrNotProposed = errors.New("engine: proposal not accepted before the deadline; nothing was applied")
	// ErrRejected: dragonboat rejected the entry; nothing was applied.
	ErrRejected = errors.New("engine: proposal rejected by raft")

	// ErrNotReady: this replica is still loading the group (snapshot and
	// log replay after a start); try again shortly.
	ErrNotReady = errors.New("engine: group not loaded on this replica yet")

	// ErrConfig is wrapped by every configuration error.
	ErrConfig = errors.New("engine: bad configuration")
	// ErrDataDir is wrapped by errors about a data directory that does not
	// fit the configuration it is opened with.
	ErrDataDir = errors.New("engine: data directory does not match the configuration")

	// ErrMembership is wrapped by refused membership changes (a duplicate
	// ID or address, an ID that was removed, removing the last replica).
	ErrMembership = errors.New("engine: membership change refused")
	// ErrNoReplica: the replica named is not a member of the cluster.
	ErrNoReplica = errors.New("engine: no such replica")
	// ErrNoQuorum: a membership change found no leader with a quorum
	// before its deadline; nothing may have changed in that group.
	ErrNoQuorum = errors.New("engine: the group has no leader with a quorum")
)
