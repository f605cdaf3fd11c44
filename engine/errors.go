package engine

import (
	"errors"

	"shoal/cluster"
)

// The engine's sentinel errors, in one place. Match them with errors.Is;
// they arrive wrapped with the group, the command or the path involved.
// Those a caller meets are package cluster's variables, so a caller that
// does not import the engine matches them too.
var (
	// ErrClosed: the engine closed before the command was applied here.
	ErrClosed = cluster.ErrClosed
	// ErrTimeout: the command's entry was proposed but not seen applied in
	// time; it may or may not take effect. Check before resubmitting.
	ErrTimeout = cluster.ErrTimeout
	// ErrNotProposed: dragonboat kept refusing the entry (no leader, system
	// busy) until the deadline; the command was not applied.
	ErrNotProposed = cluster.ErrNotProposed
	// ErrRejected: dragonboat rejected the entry; nothing was applied.
	ErrRejected = cluster.ErrRejected

	// ErrNotReady: this replica is still loading the group (snapshot and
	// log replay after a start); try again shortly.
	ErrNotReady = cluster.ErrNotReady

	// ErrConfig is wrapped by every configuration error.
	ErrConfig = errors.New("engine: bad configuration")
	// ErrDataDir is wrapped by errors about a data directory that does not
	// fit the configuration it is opened with.
	ErrDataDir = errors.New("engine: data directory does not match the configuration")

	// ErrMembership is wrapped by refused membership changes (a duplicate
	// ID or address, an ID that was removed, removing the last replica).
	ErrMembership = cluster.ErrMembership
	// ErrNoReplica: the replica named is not a member of the cluster.
	ErrNoReplica = cluster.ErrNoReplica
	// ErrNoQuorum: a membership change found no leader with a quorum
	// before its deadline; nothing may have changed in that group.
	ErrNoQuorum = cluster.ErrNoQuorum
)
