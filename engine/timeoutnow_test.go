package engine

import (
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"shoal/internal/clock"
)

// A TimeoutNow (the leader handing over a group) reaches Raft only once
// this replica has applied what the leader announced as committed, or its
// apply stopped moving for an RTT; every other message passes at once.
func TestTimeoutNowWaitsForTheAnnouncedCommits(t *testing.T) {
	const rtt = 20 * time.Millisecond
	fc := clock.NewFake(time.Unix(1000, 0))
	e := &Engine{cfg: Config{RTT: rtt, ElectionRTT: 25, HeartbeatRTT: 2, Clock: fc},
		seen: newHeard(3, 6*rtt, fc.Now), reps: make([]atomic.Pointer[replica], 3), done: make(chan struct{})}
	defer close(e.done)
	r := &replica{}
	r.applied.Store(5)
	e.reps[1].Store(r)
	got := make(chan pb.MessageBatch, 4)
	deliver := func(b pb.MessageBatch) { got <- b }
	next := func(what string) pb.MessageBatch {
		t.Helper()
		select {
		case b := <-got:
			return b
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing delivered", what)
			return pb.MessageBatch{}
		}
	}
	none := func(what string) {
		t.Helper()
		if err := fc.BlockUntil(1, 10*time.Second); err != nil {
			t.Fatalf("%s: the TimeoutNow is not waiting: %v", what, err)
		}
		select {
		case b := <-got:
			t.Fatalf("%s: delivered %v", what, b.Requests[0].Type)
		default:
		}
	}
	timeoutNow := func(group int) pb.MessageBatch {
		return pb.MessageBatch{DeploymentId: 7, SourceAddress: "peer:1", Requests: []pb.Message{
			{Type: pb.Replicate, ShardID: shardID(group), Commit: 9},
			{Type: pb.TimeoutNow, ShardID: shardID(group), Term: 3}}}
	}

	e.receive(timeoutNow(1), deliver)
	if b := next("the append"); len(b.Requests) != 1 || b.Requests[0].Type != pb.Replicate || b.DeploymentId != 7 {
		t.Fatalf("the append was not delivered alone at once: %+v", b)
	}
	for range 3 { // applying 6, 7 and 8 of 9, one a quarter RTT
		none("applied less than the commit")
		r.applied.Add(1)
		fc.Advance(rtt / 4)
	}
	r.applied.Store(9)
	fc.Advance(rtt / 4)
	none("applied up to the commit, before the state machine's report settles")
	fc.Advance(rtt / 4)
	if b := next("the TimeoutNow"); len(b.Requests) != 1 || b.Requests[0].Type != pb.TimeoutNow ||
		b.Requests[0].Term != 3 || b.DeploymentId != 7 || b.SourceAddress != "peer:1" {
		t.Fatalf("the TimeoutNow was not delivered as sent: %+v", b)
	}

	// An apply that stopped short of the commit (what is left is Raft's
	// own) holds the TimeoutNow for one RTT only.
	r.applied.Store(5)
	e.receive(timeoutNow(1), deliver)
	next("the second append")
	for range 4 {
		none("an apply that does not move, within an RTT")
		fc.Advance(rtt / 4)
	}
	none("an apply that did not move for an RTT, before the report settles")
	fc.Advance(rtt / 4)
	next("the TimeoutNow after an RTT without progress")
}
