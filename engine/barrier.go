package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
)

// Linearizable reads share their read-index barriers. A barrier asked for
// after a read began and found applied here proves this replica holds
// everything committed before the read began; so every read that arrives
// while a group's barrier is in flight waits for the group's next barrier,
// asked as soon as the one in flight ends, and one barrier answers them all.
// (Joining the barrier in flight would not do: it may have been asked
// before something the read must see was committed.) Thousands of agents
// resyncing at once (each COMPLETE answer takes a barrier in every service
// group) then cost a barrier per group per round trip, not one each: one
// dragonboat request, channel and wait, and one look at its error, where
// each read made its own.
//
// A barrier in flight longer than an election timeout (a lost message, a
// replica far behind) no longer holds the next one back: the next starts
// beside it, so reads wait no longer than they did when each asked alone.
type barriers struct {
	groups []barrierGroup // index: group
	// ask asks for b, a barrier of group g, and returns once it ended (it
	// calls overlap past overlapAfter); spawn runs f in a goroutine unless
	// the engine is closing. The engine's askBarrier and spawn; the tests'
	// own.
	ask          func(g int, b *barrier) error
	spawn        func(f func()) bool
	overlapAfter time.Duration
	// asked counts the barriers asked for (the tests' view).
	asked atomic.Uint64
}

type barrierGroup struct {
	mu sync.Mutex
	// newest is the barrier asked last, while it is in flight; nil once it
	// ended.
	newest *barrier
	// next is the barrier the reads that arrived since newest was asked
	// wait for; nil while none wait.
	next *barrier
}

// A barrier is one read index of a group. Its readers wait for done; err,
// set before done closes, is nil once the index is applied here.
type barrier struct {
	done  chan struct{}
	err   error
	asked time.Time
}

func (e *Engine) newBarriers() *barriers {
	return &barriers{groups: make([]barrierGroup, e.cfg.Groups+1), ask: e.askBarrier, spawn: e.spawn,
		overlapAfter: time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT}
}

// join returns the barrier a read of group g arriving now waits for,
// asking for it if no barrier of the group is in flight (or the one in
// flight is older than overlapAfter).
func (bs *barriers) join(g int) *barrier {
	gr := &bs.groups[g]
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.next != nil {
		return gr.next
	}
	b := &barrier{done: make(chan struct{})}
	if gr.newest != nil && time.Since(gr.newest.asked) < bs.overlapAfter {
		gr.next = b // asked when newest ends or grows old
		return b
	}
	bs.start(gr, g, b)
	return b
}

// start asks for b in a goroutine of its own; gr.mu is held.
func (bs *barriers) start(gr *barrierGroup, g int, b *barrier) {
	b.asked = time.Now()
	gr.newest = b
	if !bs.spawn(func() { bs.run(g, b) }) {
		gr.newest = nil
		b.err = dragonboat.ErrClosed
		close(b.done)
	}
}

// run asks for b, then for each barrier that was waiting for it, until
// none waits.
func (bs *barriers) run(g int, b *barrier) {
	for b != nil {
		bs.asked.Add(1)
		err := bs.ask(g, b)
		gr := &bs.groups[g]
		gr.mu.Lock()
		b.err = err
		close(b.done)
		next := (*barrier)(nil)
		if gr.newest == b {
			gr.newest = nil
			if gr.next != nil {
				next, gr.next = gr.next, nil
				next.asked = time.Now()
				gr.newest = next
			}
		}
		gr.mu.Unlock()
		b = next
	}
}

// overlap starts the barrier waiting behind b, which has been in flight
// for overlapAfter.
func (bs *barriers) overlap(g int, b *barrier) {
	gr := &bs.groups[g]
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.newest != b || gr.next == nil {
		return // a later barrier was asked already, or none waits
	}
	next := gr.next
	gr.next = nil
	bs.start(gr, g, next)
}

// askBarrier asks for one read index of group g and waits until it is
// applied here (nil), the request ends otherwise, a newer leader is known
// (errLeaderChanged: ask again now), or the engine closes. Past an election
// timeout it lets the barrier waiting behind b start.
func (e *Engine) askBarrier(g int, b *barrier) error {
	select {
	case <-e.done:
		return dragonboat.ErrClosed
	default:
	}
	_, term := e.lead.leaderTerm(g)
	rs, err := e.nh.ReadIndex(shardID(g), e.cfg.ProposeTimeout)
	if err != nil {
		return err
	}
	overlap := time.NewTimer(e.reads.overlapAfter)
	defer overlap.Stop()
	for {
		select {
		case r := <-rs.ResultC():
			rs.Release()
			switch {
			case r.Completed():
				return nil
			case r.Dropped():
				return dragonboat.ErrShardNotReady
			case r.Terminated():
				return dragonboat.ErrClosed
			}
			return dragonboat.ErrTimeout
		case <-e.lead.notified(g):
			if leader, now := e.lead.leaderTerm(g); leader != 0 && now > term {
				return errLeaderChanged // rs is abandoned; dragonboat ends it
			}
		case <-overlap.C:
			e.reads.overlap(g, b)
		case <-e.done:
			return dragonboat.ErrClosed
		}
	}
}

// tempErrors are the errors dragonboat.IsTempError calls temporary.
var tempErrors = [...]error{
	dragonboat.ErrSystemBusy,
	dragonboat.ErrShardClosed,
	dragonboat.ErrShardNotInitialized,
	dragonboat.ErrShardNotReady,
	dragonboat.ErrTimeout,
	dragonboat.ErrClosed,
	dragonboat.ErrAborted,
}

// temporary is dragonboat.IsTempError for errors made in this process:
// it compares err's chain with the sentinels by identity. IsTempError
// uses cockroachdb's errors.Is, which, for every sentinel err is not,
// renders err's message and strips its redaction marks with a regular
// expression (seven times for an error that is none of them): 8 % of a
// follower's CPU in a 10,000-agent ramp, for the reads that failed and
// were retried.
func temporary(err error) bool {
	for _, t := range tempErrors {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
