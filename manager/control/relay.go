package control

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// An agent heartbeats the manager it already talks to (its current
// manager). The cluster's leader answers as it always did; a follower
// relays: it queues the heartbeat, and its relay loop sends the queued ones
// to the leader in one call over a kept-alive connection between managers
// (LeaderLink). The leader runs each entry through its node monitor and
// answers each one; the follower answers each waiting agent with what the
// leader said. Heartbeats still live only in the leader's memory, and the
// node status an ack carries is the leader's. A follower that knows no
// leader answers unavailable with a retry delay; one whose relay failed or
// did not come back in time answers unavailable (retry here) while the
// leader answered another batch within a period (it is slow: leaderSlow),
// else not_leader naming the leader, and the agent's client then
// heartbeats the leader directly.
//
// Why: with every agent heartbeating the leader, the leader held a
// connection per agent beside those of its own agents, and after a leader
// kill the whole fleet dialled the new leader at once (a TLS handshake
// each, on one replica).

// LeaderLink carries a batch of relayed heartbeats to the manager at
// leader (its API address) in one call and returns the leader's answer to
// each, in order. An error means the batch as a whole got no answer (the
// leader unreachable, the call timed out, refused): every entry then takes
// the fallback.
type LeaderLink interface {
	RelayHeartbeats(ctx context.Context, leader string, beats []wire.Heartbeat) ([]BeatAnswer, error)
}

// BeatAnswer is the leader's answer to one heartbeat of a relayed batch:
// its ack, or why it was refused (a *wire.Error once it crossed the wire;
// on the leader, whatever the heartbeat failed with, for the API to map).
type BeatAnswer struct {
	Ack *wire.HeartbeatAck
	Err error
}

// RelayConfig tunes the heartbeat relay of a follower.
type RelayConfig struct {
	// Linger is how long the oldest queued heartbeat waits for others to
	// join its batch. Default 20ms.
	Linger time.Duration
	// MaxBatch is the most heartbeats in one call to the leader; a longer
	// queue is split. Default 256.
	MaxBatch int
	// InFlight is the most batches awaiting the leader's answer at once
	// (each holds a connection to the leader while it waits): a batch
	// whose entries wait for a status change to commit does not hold
	// back the next one. Default 2.
	InFlight int
	// Wait is the least a relayed heartbeat waits for the leader's answer
	// before its agent is answered without one (relay.wait: half the
	// heartbeat period the leader last handed out, when that is longer).
	// It stays under the agent's shortest heartbeat timeout (a second): an
	// agent that gives up on a call closes its connection and dials
	// again. Default 750ms.
	Wait time.Duration
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Linger <= 0 {
		c.Linger = 20 * time.Millisecond
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.InFlight <= 0 {
		c.InFlight = 2
	}
	if c.Wait <= 0 {
		c.Wait = 750 * time.Millisecond
	}
	return c
}

// LeaderBeatWait bounds the leader's work on one relayed batch when the
// caller's context has no deadline of its own (the API gives it most of
// the wait the follower sent): an entry whose status change has not
// committed by then (or that reached a leader whose monitor is still
// starting) is answered with why, so that the follower hears back before
// its agents' wait ends.
const LeaderBeatWait = 400 * time.Millisecond

// relay is a follower's queue of heartbeats for the leader and its relay
// loop, which runs while there is something to send (it is started by the
// first heartbeat queued and ends when the queue is empty).
type relay struct {
	a    *Agents
	link LeaderLink
	cfg  RelayConfig
	// slots holds one token per batch awaiting the leader's answer.
	slots chan struct{}
	// full is poked when the queue reaches a whole batch.
	full chan struct{}
	// period is the heartbeat period of the last ack the leader
	// answered; answered is when a batch last got the leader's answer
	// (clock nanoseconds, 0: never). Together they tell a leader that is
	// slow from one this replica cannot reach (Agents.Heartbeat).
	period   atomic.Int64
	answered atomic.Int64
	mu       struct {
		sync.Mutex
		queue   []*queuedBeat
		running bool // the loop runs
		// logged is when a failed batch was last logged; unlogged
		// counts those failed since (one line per relayLogEvery).
		logged   time.Time
		unlogged int
	}
}

// relayLogEvery is the most often a failed relay is logged: while the
// leader is unreachable every batch fails.
const relayLogEvery = 10 * time.Second

// queuedBeat is one agent's heartbeat waiting for the leader's answer.
type queuedBeat struct {
	hb   wire.Heartbeat
	at   time.Time
	done chan relayed // buffered: the loop never waits for the agent
	// gone is set when the agent's call stopped waiting: an entry not
	// sent yet is dropped.
	gone atomic.Bool
}

// relayed is a queued heartbeat's outcome: the leader's answer, or failed
// (no answer for the batch).
type relayed struct {
	ans    BeatAnswer
	failed bool
}

func newRelay(a *Agents, link LeaderLink, cfg RelayConfig) *relay {
	cfg = cfg.withDefaults()
	return &relay{a: a, link: link, cfg: cfg, slots: make(chan struct{}, cfg.InFlight), full: make(chan struct{}, 1)}
}

// errRelayFailed marks a relayed heartbeat that got no answer from the
// leader: the caller answers with the fallback.
var errRelayFailed = errors.New("the leader did not answer the relayed heartbeat")

// beat relays hb to the leader and returns the leader's answer, or
// errRelayFailed when there was none within wait (or ctx's).
func (r *relay) beat(ctx context.Context, hb *wire.Heartbeat, wait time.Duration) (*wire.HeartbeatAck, error) {
	q := &queuedBeat{hb: *hb, at: r.a.cfg.Clock.Now(), done: make(chan relayed, 1)}
	r.enqueue(q)
	t := r.a.cfg.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case out := <-q.done:
		if out.failed {
			return nil, errRelayFailed
		}
		if out.ans.Err != nil {
			return nil, out.ans.Err
		}
		if out.ans.Ack == nil {
			return nil, errRelayFailed
		}
		return out.ans.Ack, nil
	case <-t.C():
	case <-ctx.Done():
	}
	q.gone.Store(true)
	return nil, errRelayFailed
}

func (r *relay) enqueue(q *queuedBeat) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.queue = append(r.mu.queue, q)
	if len(r.mu.queue) >= r.cfg.MaxBatch {
		select {
		case r.full <- struct{}{}:
		default:
		}
	}
	if !r.mu.running {
		r.mu.running = true
		go r.loop()
	}
}

// loop sends the queue in batches until it is empty: a batch goes once
// its oldest entry has lingered (or the queue holds a whole batch) and
// fewer than InFlight batches await the leader's answer.
func (r *relay) loop() {
	for {
		r.mu.Lock()
		if len(r.mu.queue) == 0 {
			r.mu.running = false
			r.mu.Unlock()
			return
		}
		oldest, full := r.mu.queue[0].at, len(r.mu.queue) >= r.cfg.MaxBatch
		r.mu.Unlock()
		if !full {
			if d := oldest.Add(r.cfg.Linger).Sub(r.a.cfg.Clock.Now()); d > 0 {
				linger := r.a.cfg.Clock.NewTimer(d)
				select {
				case <-linger.C():
				case <-r.full:
				}
				linger.Stop()
			}
		}
		r.slots <- struct{}{}
		r.mu.Lock()
		n := min(len(r.mu.queue), r.cfg.MaxBatch)
		batch := make([]*queuedBeat, 0, n)
		for _, q := range r.mu.queue[:n] {
			if !q.gone.Load() {
				batch = append(batch, q)
			}
		}
		clear(r.mu.queue[:n])
		r.mu.queue = r.mu.queue[n:]
		if len(r.mu.queue) == 0 {
			r.mu.queue = nil // let the backing array go
		}
		r.mu.Unlock()
		select {
		case <-r.full: // that poke is served
		default:
		}
		go r.send(batch)
	}
}

// send relays one batch and hands each entry its answer; it frees its
// slot when done.
func (r *relay) send(batch []*queuedBeat) {
	defer func() { <-r.slots }()
	if len(batch) == 0 {
		return
	}
	fail := func() {
		for _, q := range batch {
			q.done <- relayed{failed: true}
		}
	}
	leader := r.a.leaderAddr()
	if leader == "" || r.a.leadsHere() {
		// No leader to relay to; or this replica was elected meanwhile:
		// the agents' next heartbeats are answered here directly.
		fail()
		return
	}
	beats := make([]wire.Heartbeat, len(batch))
	for i, q := range batch {
		beats[i] = q.hb
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.wait())
	defer cancel()
	answers, err := r.link.RelayHeartbeats(ctx, leader, beats)
	if err != nil || len(answers) != len(batch) {
		if err != nil {
			r.logFailure(len(batch), leader, err)
		}
		fail()
		return
	}
	r.answered.Store(r.a.cfg.Clock.Now().UnixNano())
	for i, q := range batch {
		if a := answers[i].Ack; a != nil && a.Period > 0 {
			r.period.Store(a.Period)
		}
		q.done <- relayed{ans: answers[i]}
	}
}

// wait is how long a relayed heartbeat waits for the leader's answer:
// half the period the leader last handed out, at least RelayConfig.Wait.
// An agent gives up on a heartbeat after a period at the soonest (at
// least a second); a leader busy with a ramp or a reconnecting fleet
// took longer than 750ms over a batch often, and every agent of a batch
// then heartbeat it directly: a connection and a TLS handshake more on
// the busiest replica.
func (r *relay) wait() time.Duration {
	return max(r.cfg.Wait, time.Duration(r.period.Load())/2)
}

// leaderSlow reports whether a relayed batch got the leader's answer
// within the last heartbeat period (at least two waits): a heartbeat that
// got none since is then late, not lost, and its agent retries here
// instead of dialling the leader. A leader that answered nothing for a
// period is taken for out of this replica's reach.
func (r *relay) leaderSlow() bool {
	at := r.answered.Load()
	if at == 0 {
		return false
	}
	within := max(time.Duration(r.period.Load()), 2*r.wait())
	return r.a.cfg.Clock.Now().Sub(time.Unix(0, at)) < within
}

// logFailure logs a batch the leader did not answer, at most once per
// relayLogEvery, saying how many others failed since the last line.
func (r *relay) logFailure(n int, leader string, err error) {
	if r.a.cfg.Logf == nil {
		return
	}
	now := r.a.cfg.Clock.Now()
	r.mu.Lock()
	if now.Sub(r.mu.logged) < relayLogEvery {
		r.mu.unlogged++
		r.mu.Unlock()
		return
	}
	others := r.mu.unlogged
	r.mu.logged, r.mu.unlogged = now, 0
	r.mu.Unlock()
	r.a.cfg.Logf("heartbeat relay: %d heartbeats got no answer from the leader at %s (their agents retry here, or send them to it directly once it has answered nothing for a heartbeat period): %v (%d other batches failed since the last line)",
		n, leader, err, others)
}

// relayBeat is a follower's Heartbeat: it relays hb to the leader and
// answers what the leader said. While the leadership moves it holds the
// heartbeat, within the relay's wait from its arrival, instead of
// answering at once: when no leader is known (an election), and when the
// relay failed while the leader had answered a batch within the last
// period (it died, or is slow), it waits for the next leader this replica
// hears of and relays to it. Answered "retry" at once, the agent came
// back after its retry delay, which grows with each failure (0.25-0.5 s,
// then 0.5-1 s, 1-2 s, ...): a fleet that heartbeat in the seconds of an
// election or of a new leader's start reached it seconds after it could
// have. Likewise a leader's "retry shortly" (its monitor is starting) is
// retried from here within the wait. A relayed heartbeat that is still
// unanswered when the wait ends
// is answered as before: unavailable when no leader is known or the
// leader is slow (the agent retries here), not_leader naming the leader
// when it has answered nothing for a period (the agent's client sends the
// heartbeat to it directly). The wait stays under the agent's heartbeat
// timeout (RelayConfig.Wait).
func (a *Agents) relayBeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	r := a.relay
	wait := r.wait()
	deadline := a.cfg.Clock.Now().Add(wait)
	self := a.cfg.Self.ReplicaID()
	for {
		leader, next := a.cfg.Leaders.LeaderNotice(route.ClusterGroup)
		if leader == 0 {
			// The engine's notice may lag its own view by a hop.
			leader, _ = a.cfg.Leaders.Leader(route.ClusterGroup)
		}
		switch {
		case leader == self:
			// Elected here meanwhile: the monitor answers (or asks for
			// a retry while it starts).
			ack, here, err := a.monitorBeat(ctx, hb)
			if !here {
				err = Starting()
			}
			if a.retryWithin(ctx, err, deadline) {
				continue
			}
			return ack, err
		case leader != 0 && a.stream.managerAddr(leader) != "":
			left := deadline.Sub(a.cfg.Clock.Now())
			if left <= 0 {
				return a.unrelayed()
			}
			ack, err := r.beat(ctx, hb, left)
			if !errors.Is(err, errRelayFailed) {
				if a.retryWithin(ctx, err, deadline) {
					continue
				}
				return ack, err
			}
			if !r.leaderSlow() {
				// Silent for a whole period: out of this replica's
				// reach, not in a hand-over.
				return a.unrelayed()
			}
		}
		left := deadline.Sub(a.cfg.Clock.Now())
		if left <= 0 {
			return a.unrelayed()
		}
		hold := a.cfg.Clock.NewTimer(left)
		select {
		case <-next:
			hold.Stop()
			continue
		case <-hold.C():
		case <-ctx.Done():
			hold.Stop()
		}
		return a.unrelayed()
	}
}

// retryWithin waits out the retry delay of a new leader's answer that it
// is starting (Starting) when that ends before deadline, and reports
// whether it did: the heartbeat is then sent again from here, not by its
// agent after the agent's own, longer, retry delay.
func (a *Agents) retryWithin(ctx context.Context, err error, deadline time.Time) bool {
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnavailable || we.Message != startingMessage || we.RetryAfter <= 0 {
		return false
	}
	d := time.Duration(we.RetryAfter)
	if a.cfg.Clock.Now().Add(d).After(deadline) {
		return false
	}
	t := a.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// unrelayed answers a heartbeat the relay got no answer for: retry here
// while no leader is known or the leader answers relays (late), else
// not_leader naming the leader.
func (a *Agents) unrelayed() (*wire.HeartbeatAck, error) {
	switch {
	case a.leadsHere():
		return nil, Starting()
	case a.leaderAddr() == "":
		return nil, &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(500 * time.Millisecond),
			Message: "this manager does not know the cluster's leader right now; retry"}
	case a.relay.leaderSlow():
		// The leader answers relayed batches, late: sending this agent
		// to it directly would add a connection to its load.
		return nil, &wire.Error{Code: wire.CodeUnavailable,
			Message: "the cluster's leader is slow to answer heartbeats; retry"}
	}
	return nil, a.notLeader()
}

// RelayedHeartbeats is the leader's side of the relay: it records each
// heartbeat of a batch a follower relayed with the node monitor, as if the
// agent had sent it here (Heartbeat), and answers each one in order. The
// entries run at once, so that one waiting for its node's status change to
// commit does not hold back the others; none waits past ctx's deadline
// (LeaderBeatWait when it has none). A replica that does not run the
// monitor answers each entry not_leader (a relayed heartbeat is never
// relayed again). The caller checks that a manager sent the batch.
func (a *Agents) RelayedHeartbeats(ctx context.Context, beats []wire.Heartbeat) []BeatAnswer {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, LeaderBeatWait)
		defer cancel()
	}
	out := make([]BeatAnswer, len(beats))
	// A direct heartbeat of a removed node is refused before it reaches
	// the monitor (the API checks every agent call against this replica's
	// state); a relayed one was checked on the follower, which may not have
	// applied the removal yet.
	removed := make([]bool, len(beats))
	_ = a.cfg.Cluster.ReadLocal(route.ClusterGroup, func(st *statemachine.State) {
		for i := range beats {
			removed[i] = st.NodeRemoved(beats[i].NodeID)
		}
	})
	one := func(i int) {
		if removed[i] {
			out[i] = BeatAnswer{Err: errRemoved()}
			return
		}
		ack, _, err := a.monitorBeat(ctx, &beats[i])
		out[i] = BeatAnswer{Ack: ack, Err: err}
	}
	if len(beats) == 1 {
		one(0)
		return out
	}
	var wg sync.WaitGroup
	for i := range beats {
		wg.Go(func() { one(i) })
	}
	wg.Wait()
	return out
}
