package engine

import (
	"time"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// receive is the transport's hook (raftnet.Factory.Receive): it records
// what the batch tells of the peers (heard) and holds back a leader's
// TimeoutNow — "campaign now: I hand you the leadership" — until this
// replica has applied what the leader told it was committed.
//
// Dragonboat's transfer target skips the campaign while it has committed
// entries it has not applied (it cannot tell them from membership
// changes), and the leader, which stopped taking proposals for the
// transfer, then waits out an election timeout before it gives up: while
// writes flow the target is nearly always an entry or two behind, so half
// the planned hand-overs cost the group half a second of writes. The
// leader takes no proposals during the transfer, so the target's apply
// catches up within a round trip; delivering the TimeoutNow then makes
// the campaign go ahead. Holding a Raft message back is safe: Raft
// tolerates any message's delay or loss.
func (e *Engine) receive(b pb.MessageBatch, deliver raftio.MessageHandler) {
	e.seen.observe(&b)
	n := 0
	for i := range b.Requests {
		if b.Requests[i].Type == pb.TimeoutNow {
			n++
		}
	}
	if n == 0 {
		deliver(b)
		return
	}
	rest := make([]pb.Message, 0, len(b.Requests)-n)
	var held []pb.Message
	for _, m := range b.Requests {
		if m.Type == pb.TimeoutNow {
			held = append(held, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(rest) > 0 {
		out := b
		out.Requests = rest
		deliver(out)
	}
	for _, m := range held {
		one := b
		one.Requests = []pb.Message{m}
		e.spawn(func() { e.holdTimeoutNow(one, deliver) })
	}
}

// holdTimeoutNow delivers b, a TimeoutNow, once this replica's state
// machine of its group has applied up to the highest commit index its
// leader announced, or has applied nothing for an RTT (what is left is not
// the state machine's: Raft's own session entries), or after
// holdTimeoutNowMax election timeouts' worth of waiting.
func (e *Engine) holdTimeoutNow(b pb.MessageBatch, deliver raftio.MessageHandler) {
	shard := b.Requests[0].ShardID
	g := groupOf(shard)
	if g < 0 || g >= len(e.reps) || e.reps[g].Load() == nil {
		deliver(b)
		return
	}
	r := e.reps[g].Load()
	start := e.cfg.Clock.Now()
	deadline := start.Add(time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT * holdTimeoutNowMax / 4)
	last, moved := r.applied.Load(), start
	waited := false
	for {
		now := e.cfg.Clock.Now()
		applied := r.applied.Load()
		if applied != last {
			last, moved = applied, now
		}
		if applied >= e.seen.commit(shard) || now.Sub(moved) >= e.cfg.RTT || !now.Before(deadline) {
			break
		}
		waited = true
		if !e.idle(e.cfg.RTT / 4) {
			return
		}
	}
	// Dragonboat reads the applied index its state machine reports after
	// Update returns: give it that moment.
	if waited && !e.idle(e.cfg.RTT/4) {
		return
	}
	deliver(b)
}

// holdTimeoutNowMax is, in quarters of an election timeout, the longest a
// TimeoutNow is held: the leader abandons the transfer after one.
const holdTimeoutNowMax = 3
