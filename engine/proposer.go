package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"shoal/route"
	"shoal/statemachine"
)

// waiter collects the outcomes of one submission, one slot per command.
type waiter struct {
	out  []route.Outcome
	left atomic.Int32
	done chan struct{}
}

func (w *waiter) deliver(slot int, o route.Outcome) {
	w.out[slot] = o
	w.settle(1)
}

// settle counts n outcomes delivered.
func (w *waiter) settle(n int) {
	if w.left.Add(-int32(n)) == 0 {
		close(w.done)
	}
}

// results holds decoded results' arrays for reuse (*[]statemachine.Result):
// entries in flight are awaited concurrently.
var results sync.Pool

// call is one command queued for one group: its encoding, checked
// (statemachine.AppendChecked), which the entry's encoding copies; its
// length counts against the batch, queue and in-flight byte limits.
type call struct {
	enc  []byte
	w    *waiter
	slot int
	// notAfter is when the submitter stops waiting (its context's
	// deadline, unix nanoseconds; 0: none).
	notAfter int64
}

// proposer coalesces one group's submissions into Raft entries: one
// goroutine takes queued calls in order, encodes them into an entry
// stamped with the clock, and proposes it; each entry in flight has its own
// goroutine waiting for the result. In-flight and queued bytes are bounded.
//
// Each entry in flight holds a dragonboat client session of its own (a
// pool, registered on demand, at most MaxInFlightEntries): when the
// group's leader changes while an entry waits — a proposal forwarded to a
// leader that died or handed over is lost with it — the entry is proposed
// again at once under the same session and series ID, and the state
// machine applies it at most once (a duplicate gets the first result).
type proposer struct {
	nh    *dragonboat.NodeHost
	cfg   *Config
	group int
	lead  *leadership
	kick  chan struct{}
	// reproposed counts entries proposed again after a leader change.
	reproposed atomic.Uint64
	stop       chan struct{}
	done       chan struct{}
	// proposed counts the entries this replica proposed and the commands
	// they carried (the mean batch size is their ratio); last is when it
	// last proposed one (unix nanoseconds on the engine's clock).
	proposed struct {
		entries, commands atomic.Uint64
		last              atomic.Int64
	}

	mu struct {
		sync.Mutex
		// queue is the queued calls: the submissions' own slices in
		// order (never an empty one), the first from head on. Appending
		// every submission's calls to one slice copied them as it grew
		// and allocated each entry's calls about twice (133 MB of a
		// follower's 5.7 GB in 20 s of a 1M ramp); take copies an entry's
		// calls once, into an array of its size, only when they span
		// submissions.
		queue      [][]call
		head       int // calls of queue[0] already taken
		queued     int // bytes in queue
		inflight   int // bytes proposed, not yet applied here
		entries    int // entries proposed, not yet applied here
		closed     bool
		space      chan struct{}     // closed (and replaced) when bytes free up
		sessions   []*client.Session // registered, free for an entry
		registered int               // sessions registered or being registered
	}
}

func newProposer(nh *dragonboat.NodeHost, cfg *Config, group int, lead *leadership) *proposer {
	p := &proposer{
		nh:    nh,
		cfg:   cfg,
		group: group,
		lead:  lead,
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	p.mu.space = make(chan struct{})
	go p.run()
	go p.prefill()
	go p.beat()
	return p
}

// enqueue adds calls to the queue in order, waiting while the queue is
// full; the queue may keep calls' array (the caller must not reuse it).
func (p *proposer) enqueue(ctx context.Context, calls []call) error {
	size := 0
	for i := range calls {
		size += len(calls[i].enc)
	}
	p.mu.Lock()
	for !p.mu.closed && p.mu.queued > 0 && p.mu.queued+size > p.cfg.MaxQueuedBytes {
		space := p.mu.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.stop:
		}
		p.mu.Lock()
	}
	if p.mu.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if len(calls) > 0 {
		p.mu.queue = append(p.mu.queue, calls) // the caller's: no copy
	}
	p.mu.queued += size
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return nil
}

// eachQueued calls fn with each queued call in order until it returns
// false; the caller holds mu.
func (p *proposer) eachQueued(fn func(*call) bool) {
	for i, cs := range p.mu.queue {
		from := 0
		if i == 0 {
			from = p.mu.head
		}
		for j := from; j < len(cs); j++ {
			if !fn(&cs[j]) {
				return
			}
		}
	}
}

// advanceLocked drops the first k queued calls (k ≤ those of queue[0]
// from head).
func (p *proposer) advanceLocked(k int) {
	p.mu.head += k
	if p.mu.head == len(p.mu.queue[0]) {
		p.mu.queue[0] = nil // pin nothing taken
		p.mu.queue = p.mu.queue[1:]
		p.mu.head = 0
	}
}

// freeLocked wakes everyone waiting for queue or in-flight space.
func (p *proposer) freeLocked() {
	close(p.mu.space)
	p.mu.space = make(chan struct{})
}

// take removes the calls of the next entry from the queue. With nothing to take it
// returns nil and, if an in-flight limit is what stops it, a channel that
// closes when space frees.
func (p *proposer) take() (calls []call, size int, wait <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mu.queue) == 0 {
		return nil, 0, nil
	}
	if p.mu.inflight >= p.cfg.MaxInFlightBytes || p.mu.entries >= p.cfg.MaxInFlightEntries {
		return nil, 0, p.mu.space
	}
	n := 0
	p.eachQueued(func(c *call) bool {
		if n >= p.cfg.MaxBatchRecords || n > 0 && size+len(c.enc) > p.cfg.MaxBatchBytes {
			return false
		}
		size += len(c.enc)
		n++
		return true
	})
	if first := p.mu.queue[0][p.mu.head:]; n <= len(first) {
		calls = first[:n:n] // within one submission's calls: no copy
		p.advanceLocked(n)
	} else {
		calls = make([]call, 0, n)
		for len(calls) < n {
			first := p.mu.queue[0][p.mu.head:]
			k := min(n-len(calls), len(first))
			calls = append(calls, first[:k]...)
			p.advanceLocked(k)
		}
	}
	if len(p.mu.queue) == 0 {
		p.mu.queue = nil
	}
	p.mu.queued -= size
	p.mu.inflight += size
	p.mu.entries++
	p.freeLocked()
	return calls, size, nil
}

func (p *proposer) run() {
	defer close(p.done)
	for {
		select {
		case <-p.kick:
		case <-p.stop:
			return
		}
		for {
			calls, size, wait := p.take()
			if calls == nil {
				if wait == nil {
					break
				}
				select {
				case <-wait:
					continue
				case <-p.stop:
					return
				}
			}
			p.propose(calls, size)
		}
	}
}

// propose encodes one entry's calls and proposes it, and leaves a goroutine waiting
// for its result.
func (p *proposer) propose(calls []call, size int) {
	now := p.cfg.Clock.Now()
	deadline := now.Add(p.cfg.ProposeTimeout)
	ent := p.entry(calls, size, now, deadline)
	p.proposed.entries.Add(1)
	p.proposed.commands.Add(uint64(len(calls)))
	p.proposed.last.Store(now.UnixNano())
	p.send(ent, calls, size, deadline)
}

// entry encodes the entry of calls taken together (size bytes of
// commands), stamped now and refused after the earliest of deadline and
// the calls' own.
func (p *proposer) entry(calls []call, size int, now, deadline time.Time) []byte {
	st := entryStamp{now: now.UnixNano(), notAfter: p.notAfter(deadline, calls)}
	b := appendEntryHeader(make([]byte, 0, entryHeaderLen+binary.MaxVarintLen64+1+size), st)
	b = statemachine.AppendBatchHeader(b, len(calls))
	for i := range calls {
		b = append(b, calls[i].enc...)
	}
	return b
}

// send proposes a raw entry for calls (the test hook proposes garbage this
// way too) and hands the request to a waiting goroutine.
func (p *proposer) send(ent []byte, calls []call, size int, deadline time.Time) {
	sess, err := p.session(deadline)
	if err != nil {
		p.finish(calls, size, func(int) route.Outcome { return route.Outcome{Failed: err} })
		return
	}
	_, term := p.lead.leaderTerm(p.group)
	rs, err := p.proposeRetry(sess, ent, deadline)
	if err != nil {
		p.release(sess)
		p.finish(calls, size, func(int) route.Outcome { return route.Outcome{Failed: err} })
		return
	}
	go p.await(sess, rs, term, ent, calls, size, deadline)
}

// session returns a free client session, registering a new one (a Raft
// round trip, once per session) when none is free.
func (p *proposer) session(deadline time.Time) (*client.Session, error) {
	p.mu.Lock()
	if n := len(p.mu.sessions); n > 0 {
		s := p.mu.sessions[n-1]
		p.mu.sessions = p.mu.sessions[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	p.mu.registered++
	p.mu.Unlock()
	s, err := p.register(deadline)
	if err != nil {
		p.mu.Lock()
		p.mu.registered--
		p.mu.Unlock()
	}
	return s, err
}

// register registers a new client session with the group.
func (p *proposer) register(deadline time.Time) (*client.Session, error) {
	backoff := p.cfg.RTT
	for attempt := 0; ; attempt++ {
		left := deadline.Sub(p.cfg.Clock.Now())
		if left < 2*p.cfg.RTT {
			return nil, fmt.Errorf("%w (group %d: no client session, %d attempts)", ErrNotProposed, p.group, attempt)
		}
		// A registration forwarded to a leader that dies is lost like any
		// proposal: try again after an election's time rather than wait
		// out the whole deadline (a lost one leaves an unused session,
		// which the group's LRU drops).
		ctx, cancel := context.WithTimeout(context.Background(), min(left, p.registerTimeout()))
		s, err := p.nh.SyncGetSession(ctx, shardID(p.group))
		cancel()
		switch {
		case err == nil:
			return s, nil
		case errors.Is(err, dragonboat.ErrClosed), errors.Is(err, dragonboat.ErrShardClosed):
			return nil, ErrClosed
		case !temporary(err) && !errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("engine: register a client session with group %d: %w", p.group, err)
		}
		select {
		case <-p.cfg.Clock.After(backoff):
		case <-p.stop:
			return nil, ErrClosed
		}
		backoff = min(2*backoff, 20*p.cfg.RTT)
	}
}

// registerTimeout bounds one attempt to register a session: about two
// election timeouts.
func (p *proposer) registerTimeout() time.Duration {
	return max(4*time.Duration(p.cfg.ElectionRTT)*p.cfg.RTT, 20*p.cfg.RTT)
}

// prefill registers the whole pool of sessions in the background once
// the group has a leader, so that a burst after a failover finds them
// ready instead of registering while leadership moves.
func (p *proposer) prefill() {
	for {
		if leader, _ := p.lead.leaderTerm(p.group); leader != 0 {
			break
		}
		select {
		case <-p.lead.notified(p.group):
		case <-p.stop:
			return
		}
	}
	for {
		p.mu.Lock()
		if p.mu.registered >= p.cfg.MaxInFlightEntries || p.mu.closed {
			p.mu.Unlock()
			return
		}
		p.mu.registered++
		p.mu.Unlock()
		s, err := p.register(p.cfg.Clock.Now().Add(p.cfg.ProposeTimeout))
		p.mu.Lock()
		if err != nil {
			p.mu.registered--
			p.mu.Unlock()
			return // the rest are registered on demand
		}
		p.mu.sessions = append(p.mu.sessions, s)
		p.mu.Unlock()
	}
}

// release marks the session's proposal finished (applied, or given up:
// a later proposal on it tells the state machine never to apply the old
// one after) and returns it to the pool.
func (p *proposer) release(s *client.Session) {
	s.ProposalCompleted()
	p.mu.Lock()
	p.mu.sessions = append(p.mu.sessions, s)
	p.mu.Unlock()
}

// proposeRetry proposes ent, backing off while dragonboat reports a
// temporary refusal (busy, no leader yet), until the deadline.
func (p *proposer) proposeRetry(sess *client.Session, ent []byte, deadline time.Time) (*dragonboat.RequestState, error) {
	backoff := p.cfg.RTT
	for attempt := 0; ; attempt++ {
		left := deadline.Sub(p.cfg.Clock.Now())
		if left < 2*p.cfg.RTT {
			return nil, fmt.Errorf("%w (group %d, %d attempts)", ErrNotProposed, p.group, attempt)
		}
		changed := p.lead.notified(p.group)
		rs, err := p.nh.Propose(sess, ent, left)
		if err == nil {
			return rs, nil
		}
		switch {
		case errors.Is(err, dragonboat.ErrClosed), errors.Is(err, dragonboat.ErrShardClosed):
			return nil, ErrClosed
		case !temporary(err):
			return nil, fmt.Errorf("engine: propose to group %d: %w", p.group, err)
		}
		select {
		case <-p.cfg.Clock.After(backoff):
		case <-changed: // a leader is elected or handed over: try at once
		case <-p.stop:
			return nil, ErrClosed
		}
		backoff = min(2*backoff, 20*p.cfg.RTT)
	}
}

// await waits for one entry's result and delivers it. An entry dropped
// before it was proposed (no leader) is proposed again, and so is one
// still waiting when a new leader is known (term newer than when it was
// proposed): the session makes a second copy harmless, and the copy the
// new leader commits completes the wait.
func (p *proposer) await(sess *client.Session, rs *dragonboat.RequestState, term uint64, ent []byte, calls []call, size int, deadline time.Time) {
	defer p.release(sess)
	for {
		var r dragonboat.RequestResult
		select {
		case r = <-rs.ResultC():
		case <-p.lead.notified(p.group):
			leader, now := p.lead.leaderTerm(p.group)
			if leader == 0 || now <= term {
				continue
			}
			term = now
			if again, err := p.proposeRetry(sess, ent, deadline); err == nil {
				// The old request is abandoned: if its entry commits after
				// all, the new one completes with the same result.
				p.reproposed.Add(1)
				rs = again
			}
			continue
		}
		rs.Release()
		var failed error
		switch {
		case r.Completed():
			p.deliver(calls, size, r.GetResult())
			return
		case r.Dropped():
			var err error
			if rs, err = p.proposeRetry(sess, ent, deadline); err == nil {
				continue
			}
			failed = err
		case r.Timeout():
			failed = fmt.Errorf("%w (group %d)", ErrTimeout, p.group)
		case r.Terminated():
			failed = ErrClosed
		case r.Rejected():
			failed = fmt.Errorf("%w (group %d)", ErrRejected, p.group)
		default:
			failed = fmt.Errorf("%w (group %d: aborted)", ErrRejected, p.group)
		}
		p.finish(calls, size, func(int) route.Outcome { return route.Outcome{Failed: failed} })
		return
	}
}

// deliver hands each call its result from an applied entry.
func (p *proposer) deliver(calls []call, size int, res sm.Result) {
	buf, _ := results.Get().(*[]statemachine.Result)
	if buf == nil {
		buf = new([]statemachine.Result)
	}
	defer results.Put(buf)
	rs, err := statemachine.DecodeResultsInto(*buf, res.Data)
	if cap(rs) > cap(*buf) {
		*buf = rs[:0]
	}
	defer clear(rs) // keep no messages
	switch {
	case err == nil && res.Value == resultCorrupt && len(rs) == 1:
		// The whole entry was rejected as corrupt: every command shares why.
		p.finish(calls, size, func(int) route.Outcome { return route.Outcome{Result: rs[0]} })
		return
	case err == nil && len(rs) != len(calls):
		err = fmt.Errorf("%w: %d results for %d commands", statemachine.ErrCorrupt, len(rs), len(calls))
	}
	if err != nil {
		failed := fmt.Errorf("engine: group %d results: %w", p.group, err)
		p.finish(calls, size, func(int) route.Outcome { return route.Outcome{Failed: failed} })
		return
	}
	p.finish(calls, size, func(i int) route.Outcome { return route.Outcome{Result: rs[i]} })
}

// finish delivers an outcome to every call of an entry and frees its
// in-flight bytes. A run of calls of one submission settles its waiter
// once.
func (p *proposer) finish(calls []call, size int, outcome func(i int) route.Outcome) {
	for i := 0; i < len(calls); {
		w, j := calls[i].w, i
		for ; j < len(calls) && calls[j].w == w; j++ {
			w.out[calls[j].slot] = outcome(j)
		}
		w.settle(j - i)
		i = j
	}
	p.mu.Lock()
	p.mu.inflight -= size
	p.mu.entries--
	p.freeLocked()
	p.mu.Unlock()
}

// close stops the loop and fails whatever is still queued. Entries in
// flight end when dragonboat terminates their requests.
func (p *proposer) close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	close(p.stop)
	p.mu.Unlock()
	<-p.done
	p.mu.Lock()
	var q []call
	p.eachQueued(func(c *call) bool { q = append(q, *c); return true })
	p.mu.queue, p.mu.head, p.mu.queued = nil, 0, 0
	p.mu.Unlock()
	for i := range q {
		q[i].w.deliver(q[i].slot, route.Outcome{Failed: ErrClosed})
	}
}
