package cluster

import "time"

// Contact is what a replica knows of its link to a group's quorum.
type Contact struct {
	// Leading: this replica leads the group. Raft's check-quorum makes a
	// leader that stops hearing a majority step down within an election
	// timeout, so a leader is in contact.
	Leading bool
	// LastContact is how long ago the group's leader last spoke to this
	// replica (0 while Leading; -1 if no leader ever did).
	LastContact time.Duration
	// OK: Leading, or the leader spoke recently enough (the engine allows
	// a few election timeouts).
	OK bool
}

// GroupMembers is one group's voting replicas (ID to Raft address) as a
// replica has applied them.
type GroupMembers struct {
	Group   int               `json:"group"`
	Members map[uint64]string `json:"members"`
	// ConfigChangeIndex is the Raft index of the last membership change
	// applied here (0 while the group is not loaded yet).
	ConfigChangeIndex uint64 `json:"config_change_index"`
}
