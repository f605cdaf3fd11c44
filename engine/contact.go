package engine

import (
	"time"

	"shoal/cluster"
)

// contactTimeouts is, in election timeouts, how long a follower may go
// without hearing its group's leader before it counts as out of contact.
// Raft's own election waits one; a busy leader's heartbeats arriving a
// little late must not make every replica hand its agents off.
const contactTimeouts = 3

// Contact is what this replica knows of its link to a group's quorum.
type Contact = cluster.Contact

// Contact reports this replica's contact with group's quorum, from what
// the transport delivered (no Raft round trip).
func (e *Engine) Contact(group int) Contact {
	if leader, _ := e.lead.leaderTerm(group); leader == e.cfg.ReplicaID {
		return Contact{Leading: true, OK: true}
	}
	s := e.seen.shard(shardID(group))
	if s == nil {
		return Contact{LastContact: -1}
	}
	s.mu.Lock()
	spoke := s.spoke
	s.mu.Unlock()
	if spoke.IsZero() {
		return Contact{LastContact: -1}
	}
	since := max(e.seen.now().Sub(spoke), 0)
	return Contact{LastContact: since, OK: since <= contactTimeouts*time.Duration(e.cfg.ElectionRTT)*e.cfg.RTT}
}
