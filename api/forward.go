package api

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/engine"
	"shoal/internal/jsoncodec"
	"shoal/statemachine"
	"shoal/wire"
)

// An agent heartbeats whichever manager it talks to; a manager that does
// not lead the cluster forwards the heartbeat to the one that does, in
// batches over one connection (as Nomad's servers forward their clients'
// calls). Heartbeats that had to reach the leader themselves made every
// agent hold a connection to it, and a leader's death made the whole fleet
// dial its successor at once: ten thousand TLS handshakes on the machines
// that were electing it, 15-20 s before every agent was back. Now only the
// agents that talked to the dead leader move, and the others' heartbeats
// wait on their own manager while it finds the new leader.

// peerBeatsPath is the leader's endpoint for forwarded heartbeats; only
// managers may call it.
const peerBeatsPath = "/v1/peer/heartbeats"

// waitHeader carries, in milliseconds, how long the caller waits for its
// answer (api/client sets it from its deadline).
const waitHeader = client.WaitHeader

const (
	// forwardHold is how long a forwarded heartbeat may wait for a leader
	// to be known and to answer before its agent is told to retry, when
	// the agent does not say how long it waits; otherwise nine tenths of
	// that, at most forwardHoldMax. A joining fleet's first heartbeats
	// wait for commits at the leader: answered "retry" after a fixed 2 s,
	// they came back at once, and a fleet of 10,000 took minutes to join.
	forwardHold    = 2 * time.Second
	forwardHoldMax = time.Minute
	// peerWarm is how often a manager makes sure it holds a connection to
	// each other manager: a new leader is busiest right after an election,
	// with the dead leader's agents dialling it, and forwarded heartbeats
	// once queued behind thousands of their TLS handshakes.
	peerWarm = 20 * time.Second
	// forwardPoll is how often a held heartbeat looks for the leader.
	forwardPoll = 50 * time.Millisecond
	// forwardBatches is how many batches may be on their way to one
	// leader at once; heartbeats arriving meanwhile form the next batch.
	forwardBatches = 4
)

// peerBeats is a batch of forwarded heartbeats, by node.
type peerBeats struct {
	Nodes []statemachine.NodeID `json:"nodes"`
}

// peerBeatResult is the leader's answer to one forwarded heartbeat: an
// acknowledgement, or the error its agent is to see.
type peerBeatResult struct {
	Ack *wire.HeartbeatAck `json:"ack,omitempty"`
	Err *wire.Error        `json:"err,omitempty"`
}

// errNoLeaderReached says a forwarded heartbeat found no leader to take it
// within forwardHold.
var errNoLeaderReached = &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(200 * time.Millisecond),
	Message: "this manager could not reach a cluster leader to take the heartbeat (an election may be under way); retry"}

// peerHeartbeats takes a batch of heartbeats another manager forwarded:
// each is handled as if its agent had sent it here.
func (s *Server) peerHeartbeats(ctx *fasthttp.RequestCtx, _ []string) error {
	var in peerBeats
	if err := jsoncodec.Unmarshal(ctx.PostBody(), &in); err != nil {
		return badRequest("forwarded heartbeats: %v", err)
	}
	out := make([]peerBeatResult, len(in.Nodes))
	var wg sync.WaitGroup
	for i, node := range in.Nodes {
		wg.Go(func() { // a node's first heartbeat after a change waits for a commit
			ack, err := s.beatHere(node)
			if err != nil {
				out[i].Err = wireErr(err)
				return
			}
			out[i].Ack = ack
		})
	}
	wg.Wait()
	return s.reply(ctx, fasthttp.StatusOK, nil, out)
}

// holdFor is how long a forwarded call may wait, from what its caller
// says it waits (waitHeader).
func holdFor(ctx *fasthttp.RequestCtx) time.Duration {
	ms, err := strconv.ParseInt(string(ctx.Request.Header.Peek(waitHeader)), 10, 64)
	if err != nil || ms <= 0 {
		return forwardHold
	}
	return min(time.Duration(ms)*time.Millisecond*9/10, forwardHoldMax)
}

// forwardBeat has the leader take node's heartbeat, waiting up to hold for
// a leader to be known and reachable and to answer.
func (s *Server) forwardBeat(node statemachine.NodeID, hold time.Duration) (*wire.HeartbeatAck, error) {
	deadline := s.cfg.Clock.Now().Add(hold)
	for {
		if addr, self := s.leaderAPI(); addr != "" && !self {
			ack, err := s.fwd.send(addr, node, deadline)
			var we *wire.Error
			switch {
			case err == nil:
				return ack, nil
			case errors.As(err, &we) && we.Code != wire.CodeNotLeader:
				return nil, we // the leader's own answer
			}
			// Unreachable, or it no longer leads: look again.
		}
		if !s.cfg.Clock.Now().Add(forwardPoll).Before(deadline) {
			return nil, errNoLeaderReached
		}
		select {
		case <-s.closed:
			return nil, errNoLeaderReached
		case <-s.cfg.Clock.After(forwardPoll):
		}
	}
}

// leaderAPI is the cluster leader's API address ("" if unknown), and
// whether it is this manager.
func (s *Server) leaderAPI() (addr string, self bool) {
	id, ok := s.e.Leader(engine.ClusterGroup)
	if !ok {
		return "", false
	}
	return s.leaderAddr(), id == s.e.ReplicaID()
}

// forwarder batches heartbeats to leaders: each leader address gets up to
// forwardBatches batches on their way at once, each carrying every
// heartbeat that waited when it left.
type forwarder struct {
	hc     *fasthttp.Client
	scheme string

	mu       sync.Mutex
	pending  map[string][]*fwdBeat // by leader address
	inFlight map[string]int
}

// fwdBeat is one forwarded heartbeat waiting for its answer.
type fwdBeat struct {
	node     statemachine.NodeID
	deadline time.Time
	ack      *wire.HeartbeatAck
	err      error
	done     chan struct{}
}

func newForwarder(hc *fasthttp.Client, scheme string) *forwarder {
	return &forwarder{hc: hc, scheme: scheme, pending: map[string][]*fwdBeat{}, inFlight: map[string]int{}}
}

// send queues node's heartbeat for the leader at addr and waits for its
// answer until deadline.
func (f *forwarder) send(addr string, node statemachine.NodeID, deadline time.Time) (*wire.HeartbeatAck, error) {
	b := &fwdBeat{node: node, deadline: deadline, done: make(chan struct{})}
	f.mu.Lock()
	f.pending[addr] = append(f.pending[addr], b)
	if f.inFlight[addr] < forwardBatches {
		f.inFlight[addr]++
		go f.flush(addr)
	}
	f.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-b.done:
		return b.ack, b.err
	case <-t.C:
		return nil, errNoLeaderReached
	}
}

// flush sends the heartbeats waiting for addr, batch after batch, until
// none waits.
func (f *forwarder) flush(addr string) {
	for {
		f.mu.Lock()
		batch := f.pending[addr]
		delete(f.pending, addr)
		if len(batch) == 0 {
			f.inFlight[addr]--
			if f.inFlight[addr] == 0 {
				delete(f.inFlight, addr)
			}
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		var deadline time.Time // the latest of the batch's
		for _, b := range batch {
			if b.deadline.After(deadline) {
				deadline = b.deadline
			}
		}
		results, err := f.post(addr, batch, deadline)
		for i, b := range batch {
			switch {
			case err != nil:
				b.err = err
			case results[i].Err != nil:
				b.err = results[i].Err
			case results[i].Ack != nil:
				b.ack = results[i].Ack
			default:
				b.err = fmt.Errorf("the leader at %s answered a forwarded heartbeat with nothing", addr)
			}
			close(b.done)
		}
	}
}

// post sends one batch to the leader at addr, waiting for the answer
// until deadline.
func (f *forwarder) post(addr string, batch []*fwdBeat, deadline time.Time) ([]peerBeatResult, error) {
	in := peerBeats{Nodes: make([]statemachine.NodeID, len(batch))}
	for i, b := range batch {
		in.Nodes[i] = b.node
	}
	body, err := jsoncodec.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(f.scheme + "://" + addr + peerBeatsPath)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	if err := f.hc.DoDeadline(req, resp, deadline); err != nil {
		return nil, fmt.Errorf("forwarding heartbeats to the leader at %s: %w", addr, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("forwarding heartbeats to the leader at %s: status %d: %s", addr, resp.StatusCode(), resp.Body())
	}
	var out []peerBeatResult
	if err := jsoncodec.Unmarshal(resp.Body(), &out); err != nil || len(out) != len(batch) {
		return nil, fmt.Errorf("forwarding heartbeats to the leader at %s: %d answers to %d heartbeats (%v)", addr, len(out), len(batch), err)
	}
	return out, nil
}

// warmPeers keeps a connection open to every other manager (an empty
// batch every peerWarm), so that the first heartbeats forwarded to a new
// leader need no handshake with it; until the server closes.
func (s *Server) warmPeers() {
	for {
		for _, addr := range s.peerManagers() {
			_, _ = s.fwd.post(addr, nil, s.cfg.Clock.Now().Add(forwardHold))
		}
		select {
		case <-s.closed:
			return
		case <-s.cfg.Clock.After(peerWarm):
		}
	}
}
