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
// announced, and who last spoke as the leader. A leader hands a group
// over to the peer that has answered longest: a peer that restarted a
// moment ago is still applying the entries it missed, and Raft's transfer
// target does not campaign while it has committed entries left to apply.
// The commit index tells a transfer target when it has applied what it
// was told (see holdTimeoutNow); the leader's last word tells whether a
// peer that is gone still led the group (see leaderGone).
type heard struct {
	// gap is how long a peer may go without answering before its run of
	// answers counts as broken.
	gap time.Duration
	now func() time.Time

	mu      sync.Mutex
	runs    map[heardKey]answerRun
	commits map[uint64]uint64     // shard: highest commit index announced
	leaders map[uint64]leaderWord // shard: the last word from a leader
}

// leaderWord is who last spoke here as a group's leader, and when.
type leaderWord struct {
	from uint64
	at   time.Time
}

type heardKey struct{ shard, replica uint64 }

// answerRun is one unbroken run of answers: its first and latest.
type answerRun struct{ since, last time.Time }

func newHeard(gap time.Duration, now func() time.Time) *heard {
	return &heard{gap: gap, now: now, runs: map[heardKey]answerRun{}, commits: map[uint64]uint64{},
		leaders: map[uint64]leaderWord{}}
}

// observe records the answers and commit indexes in a batch received from
// a peer; it keeps nothing of b.
func (h *heard) observe(b *pb.MessageBatch) {
	var now time.Time
	locked := false
	for i := range b.Requests {
		m := &b.Requests[i]
		answer := m.Type == pb.HeartbeatResp || (m.Type == pb.ReplicateResp && !m.Reject)
		leader := m.Type == pb.Heartbeat || m.Type == pb.Replicate
		if !answer && !leader {
			continue
		}
		if !locked {
			now, locked = h.now(), true
			h.mu.Lock()
		}
		if leader {
			h.commits[m.ShardID] = max(h.commits[m.ShardID], m.Commit)
			h.leaders[m.ShardID] = leaderWord{m.From, now}
			continue
		}
		k := heardKey{m.ShardID, m.From}
		r, ok := h.runs[k]
		if !ok || now.Sub(r.last) > h.gap {
			r.since = now
		}
		r.last = now
		h.runs[k] = r
	}
	if locked {
		h.mu.Unlock()
	}
}

// commit is the highest commit index a leader of shard announced here.
func (h *heard) commit(shard uint64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commits[shard]
}

// leaderSpoke reports whether replica spoke here as shard's leader within
// the last d.
func (h *heard) leaderSpoke(shard, replica uint64, d time.Duration) bool {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.leaders[shard]
	return w.from == replica && now.Sub(w.at) <= d
}

// rank orders peers as hand-over targets for a group: those answering now
// (within the gap) before the others, then the longest unbroken run first,
// then by ID.
func (h *heard) rank(group int, peers []uint64) []uint64 {
	now := h.now()
	h.mu.Lock()
	runs := make(map[uint64]answerRun, len(peers))
	for _, id := range peers {
		runs[id] = h.runs[heardKey{shardID(group), id}]
	}
	h.mu.Unlock()
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
