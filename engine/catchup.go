package engine

import (
	_ "unsafe" // go:linkname, for dragonboat's per-message entry budget
)

// MaxReplicateBytes bounds the log entries one Raft Replicate message
// carries (at least one entry is always sent, whatever its size).
//
// Dragonboat puts up to 64 MiB of entries in one message
// (settings.Soft.MaxEntrySize, which a program can change only through a
// JSON file in its working directory). A leader whose follower is behind
// (remote retry state) makes that message again at each heartbeat
// response that comes before the follower's acknowledgement, reading the
// entries afresh from its log DB on its step worker. At the end of a
// 1M/10k ramp one leader held 270 MB of such copies (raftpb Entry.unmarshal
// under handleLeaderHeartbeatResp → makeReplicateMessage → the log DB)
// queued for the connection, with a 63 MB encode buffer on the way out and
// two 63 MB frames being read by the follower. With 4 MiB a repeat costs
// 4 MiB and no step worker stalls reading 64 MiB. The price is catch-up
// speed when nothing else is proposed: dragonboat sends a follower more
// only at a heartbeat response, a new entry or a commit, so a follower
// that missed 48 MiB of an idle group took 2.6 s to catch up without the
// bound, 5.2 s with 4 MiB and 7.7 s with 1 MiB (BenchmarkCatchUpHeap,
// loaded machine); under load every new entry sends the next 4 MiB. A
// follower further behind than the log keeps (CompactionOverhead entries)
// gets a snapshot instead.
const MaxReplicateBytes = 4 << 20

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
