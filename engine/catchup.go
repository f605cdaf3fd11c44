package engine

import (
	_ "unsafe" // go:linkname, for dragonboat's per-message entry budget
)

// MaxReplicateBytes bounds the log entries one Raft Replicate message
// carries (at least one entry is always sent, whatever its size).
//
// Dragonboat sends a follower up to 64 MiB of entries in one message
// (settings.Soft.MaxEntrySize, which it lets a program change only through
// a JSON file in the process's working directory), and a leader whose
// follower is behind sends that message again at every heartbeat response
// until the follower acknowledges it (remote retry state: every 40 ms at
// the default timing). On a loaded replica that meant 63 MB frames queued
// back to back on the connection the follower's other groups' heartbeats
// share: 63 MB encode buffers on the leader, 63 MB frames plus their
// decoded entries on the follower, and heartbeats late enough for
// elections. With 1 MiB a lagging follower still catches up at 1 MiB per
// round trip (tens of MB a second here), and a resend costs 1 MiB.
const MaxReplicateBytes = 1 << 20

// raftMaxEntrySize is dragonboat's per-message entry budget
// (internal/raft's copy of settings.Soft.MaxEntrySize, read when a
// Replicate message is made). The link fails at build time if dragonboat
// renames it; TestCatchUpMessagesAreBounded checks it is obeyed.
//
//go:linkname raftMaxEntrySize github.com/lni/dragonboat/v4/internal/raft.maxEntrySize
var raftMaxEntrySize uint64

func init() {
	raftMaxEntrySize = MaxReplicateBytes
}
