package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// A group is handed to the peer that has answered its heartbeats without a
// break for longest; a peer that stopped answering comes last, whatever
// its earlier run.
func TestHandOverRanksThePeerAnsweringLongestFirst(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newHeard(4, 120*time.Millisecond, func() time.Time { return now })
	const group = 2
	answer := func(from uint64, typ pb.MessageType, reject bool) {
		a.observe(&pb.MessageBatch{Requests: []pb.Message{
			{Type: typ, ShardID: shardID(group), From: from, Reject: reject}}})
	}
	step := func(d time.Duration) { now = now.Add(d) }

	// Peers 2 and 3 answer from the start; 2 restarts (a second without
	// answers) and answers again.
	for range 10 {
		answer(2, pb.HeartbeatResp, false)
		answer(3, pb.ReplicateResp, false)
		step(40 * time.Millisecond)
	}
	for range 25 {
		answer(3, pb.HeartbeatResp, false)
		step(40 * time.Millisecond)
	}
	for range 5 {
		answer(2, pb.ReplicateResp, false)
		answer(3, pb.HeartbeatResp, false)
		step(40 * time.Millisecond)
	}
	if got := a.rank(group, []uint64{2, 3}); !slices.Equal(got, []uint64{3, 2}) {
		t.Fatalf("peer 3 answered without a break since the start, peer 2 only since its restart: ranked %v, want [3 2]", got)
	}

	// Peer 3 goes quiet; a rejected append and a vote are not answers.
	for range 5 {
		answer(2, pb.HeartbeatResp, false)
		answer(3, pb.ReplicateResp, true)
		answer(3, pb.RequestVoteResp, false)
		step(40 * time.Millisecond)
	}
	if got := a.rank(group, []uint64{2, 3}); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("peer 3 has not answered for 200ms: ranked %v, want [2 3]", got)
	}

	// Another group's answers count for that group only; with no answers
	// at all the order is by ID.
	if got := a.rank(group+1, []uint64{3, 2}); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("no answers in group %d: ranked %v, want [2 3]", group+1, got)
	}
}

// The last leader of a group is whoever last spoke here as its leader (a
// heartbeat or an append), however long ago; answers and other groups'
// leaders change nothing.
func TestLastLeaderIsWhoeverLastSpokeAsTheLeader(t *testing.T) {
	now := time.Unix(1000, 0)
	h := newHeard(4, 120*time.Millisecond, func() time.Time { return now })
	const group = 1
	say := func(g int, from uint64, typ pb.MessageType) {
		h.observe(&pb.MessageBatch{Requests: []pb.Message{{Type: typ, ShardID: shardID(g), From: from}}})
	}
	if got := h.lastLeader(shardID(group)); got != 0 {
		t.Fatalf("no leader heard yet: last leader %d, want 0", got)
	}
	say(group, 3, pb.Heartbeat)
	now = now.Add(time.Hour)
	say(group, 2, pb.HeartbeatResp)
	say(group+1, 2, pb.Replicate)
	if got := h.lastLeader(shardID(group)); got != 3 {
		t.Fatalf("replica 3 spoke as the leader an hour ago, nobody since: last leader %d, want 3", got)
	}
	say(group, 2, pb.Replicate)
	if got := h.lastLeader(shardID(group)); got != 2 {
		t.Fatalf("replica 2 appended since: last leader %d, want 2", got)
	}
}

// The peer this replica last gave its vote or pre-vote, after the leader
// last spoke and within the window, runs an election this replica
// supports; a refusal, a request received, an older grant, one from
// before the leader's last word and another group's are none.
func TestVotesGivenMarkAnElectionUnderWay(t *testing.T) {
	now := time.Unix(1000, 0)
	h := newHeard(4, 120*time.Millisecond, func() time.Time { return now })
	const group, window = 1, 2 * time.Second
	heard := func(g int, from uint64, typ pb.MessageType) {
		h.observe(&pb.MessageBatch{Requests: []pb.Message{{Type: typ, ShardID: shardID(g), From: from}}})
	}
	send := func(g int, to uint64, typ pb.MessageType, reject bool) {
		h.sent(&pb.MessageBatch{Requests: []pb.Message{{Type: typ, ShardID: shardID(g), To: to, Reject: reject}}})
	}
	gave := func() string {
		p, ok := h.gaveVote(shardID(group), window)
		return fmt.Sprint(p, ok)
	}
	heard(group, 3, pb.Heartbeat)
	now = now.Add(time.Second)
	heard(group, 2, pb.RequestPreVote)
	send(group, 2, pb.RequestPreVoteResp, true) // refused (in its lease)
	send(group+1, 1, pb.RequestVoteResp, false) // another group's
	send(group, 2, pb.HeartbeatResp, false)
	if got := gave(); got != "0 false" {
		t.Fatalf("no vote given in the group yet: %s", got)
	}
	send(group, 2, pb.RequestPreVoteResp, false)
	if got := gave(); got != "2 true" {
		t.Fatalf("replica 2 got this replica's pre-vote a moment ago: %s, want 2 true", got)
	}
	now = now.Add(100 * time.Millisecond)
	send(group, 1, pb.RequestVoteResp, false)
	if got := gave(); got != "1 true" {
		t.Fatalf("replica 1 got the last vote: %s, want 1 true", got)
	}
	now = now.Add(window + time.Millisecond)
	if got := gave(); got != "0 false" {
		t.Fatalf("the vote is older than the window: %s", got)
	}
	send(group, 2, pb.RequestVoteResp, false)
	now = now.Add(time.Millisecond)
	heard(group, 2, pb.Heartbeat) // 2 won and speaks as the leader
	if got := gave(); got != "0 false" {
		t.Fatalf("a leader spoke since the vote: %s", got)
	}
}
