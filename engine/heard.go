package engine

import (
	"cmp"
	"slices"
	"sync"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// heard records what this replica heard from its peers, per group: when
// each peer last answered its heartbeats or log appends and since when it
// has answered without a break, the highest commit index a leader
// announced, who last spoke as the leader and when, and (as it leaves) the
// last vote or pre-vote this replica gave. A leader hands a group
// over to the peer that has answered longest: a peer that restarted a
// moment ago is still applying the entries it missed, and Raft's transfer
// target does not campaign while it has committed entries left to apply.
// The commit index tells a transfer target when it has applied what it
// was told (see holdTimeoutNow); the leader's last word tells whether a
// peer that is gone still led the group, and the vote given since whether
// another survivor's election is under way (see leaderGone).
type heard struct {
	// gap is how long a peer may go without answering before its run of
	// answers counts as broken.
	gap time.Duration
	now func() time.Time
	// shards holds each group's record, by shard ID - 1: every message
	// received passes through observe, so a group's record has a lock of
	// its own and nothing is looked up by key.
	shards []shardHeard
}

// shardHeard is what was heard in one group.
type shardHeard struct {
	mu     sync.Mutex
	commit uint64               // the highest commit index announced
	leader uint64               // who last spoke as the leader
	runs   map[uint64]answerRun // by peer
	spoke  time.Time            // when the leader last spoke
	// grantee is the peer this replica last gave its vote or pre-vote,
	// at granted: that peer's election is under way (see leaderGone).
	grantee uint64
	granted time.Time
}

// answerRun is one unbroken run of answers: its first and latest.
type answerRun struct{ since, last time.Time }

func newHeard(shards int, gap time.Duration, now func() time.Time) *heard {
	h := &heard{gap: gap, now: now, shards: make([]shardHeard, shards)}
	for i := range h.shards {
		h.shards[i].runs = map[uint64]answerRun{}
	}
	return h
}

// shard returns the record of a shard, nil for one this replica does not
// host.
func (h *heard) shard(id uint64) *shardHeard {
	if id == 0 || id > uint64(len(h.shards)) {
		return nil
	}
	return &h.shards[id-1]
}

// observe records the answers, leaders (and when they spoke) and commit
// indexes in a batch received from a peer; it keeps nothing of b.
func (h *heard) observe(b *pb.MessageBatch) {
	var now time.Time
	for i := range b.Requests {
		m := &b.Requests[i]
		answer := m.Type == pb.HeartbeatResp || (m.Type == pb.ReplicateResp && !m.Reject)
		leader := m.Type == pb.Heartbeat || m.Type == pb.Replicate
		s := h.shard(m.ShardID)
		if (!answer && !leader) || s == nil {
			continue
		}
		if now.IsZero() {
			now = h.now()
		}
		s.mu.Lock()
		if leader {
			s.commit = max(s.commit, m.Commit)
			s.leader, s.spoke = m.From, now
		} else {
			r, ok := s.runs[m.From]
			if !ok || now.Sub(r.last) > h.gap {
				r.since = now
			}
			r.last = now
			s.runs[m.From] = r
		}
		s.mu.Unlock()
	}
}

// commit is the highest commit index a leader of shard announced here.
func (h *heard) commit(shard uint64) uint64 {
	s := h.shard(shard)
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commit
}

// lastLeader is the replica last heard here speaking as shard's leader,
// however long ago; 0 if none was.
func (h *heard) lastLeader(shard uint64) uint64 {
	s := h.shard(shard)
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader
}

// sent records the votes and pre-votes in a batch this replica sends to a
// peer (the transport's hook); it keeps nothing of b.
func (h *heard) sent(b *pb.MessageBatch) {
	var now time.Time
	for i := range b.Requests {
		m := &b.Requests[i]
		if (m.Type != pb.RequestVoteResp && m.Type != pb.RequestPreVoteResp) || m.Reject {
			continue
		}
		s := h.shard(m.ShardID)
		if s == nil {
			continue
		}
		if now.IsZero() {
			now = h.now()
		}
		s.mu.Lock()
		s.grantee, s.granted = m.To, now
		s.mu.Unlock()
	}
}

// gaveVote returns the peer this replica last gave its vote or pre-vote
// in shard, if it did within the last `within` and after the leader last
// spoke here: that peer's election is under way, with this replica's
// support.
func (h *heard) gaveVote(shard uint64, within time.Duration) (peer uint64, ok bool) {
	s := h.shard(shard)
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grantee == 0 || h.now().Sub(s.granted) > within || !s.granted.After(s.spoke) {
		return 0, false
	}
	return s.grantee, true
}

// rank orders peers as hand-over targets for a group: those answering now
// (within the gap) before the others, then the longest unbroken run first,
// then by ID.
func (h *heard) rank(group int, peers []uint64) []uint64 {
	now := h.now()
	runs := make(map[uint64]answerRun, len(peers))
	if s := h.shard(shardID(group)); s != nil {
		s.mu.Lock()
		for _, id := range peers {
			runs[id] = s.runs[id]
		}
		s.mu.Unlock()
	}
	fresh := func(r answerRun) bool { return !r.last.IsZero() && now.Sub(r.last) <= h.gap }
	out := slices.Clone(peers)
	slices.SortStableFunc(out, func(x, y uint64) int {
		rx, ry := runs[x], runs[y]
		if fx, fy := fresh(rx), fresh(ry); fx != fy {
			if fx {
				return -1
			}
			return 1
		}
		if c := rx.since.Compare(ry.since); c != 0 && !rx.since.IsZero() && !ry.since.IsZero() {
			return c
		}
		return cmp.Compare(x, y)
	})
	return out
}
