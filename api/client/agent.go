package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// AgentClient speaks the agent protocol (wire/ frames over HTTP) to a list
// of managers. Re-reports go to the cluster leader (learned from
// not_leader answers and from polls); everything else, heartbeats too, to
// the current manager, moving to another one on a transport error. A
// follower relays heartbeats to the leader; one that cannot reach it
// answers not_leader naming the leader, and that heartbeat goes to the
// leader directly. It is safe for concurrent use; many
// simulated agents may share one fasthttp.Client.
type AgentClient struct {
	hc *fasthttp.Client // the settings of hosts
	// hosts holds a host client per manager, shared with every
	// AgentClient of hc (hosts.go).
	hosts *hostSet
	// short is the agent's turn for a short call (session, status report,
	// sync, renewal): one at a time, so that beside its long poll and its
	// heartbeat an agent needs one more connection, and neither of those
	// two ever waits for a connection behind a report waiting on a commit.
	short chan struct{}
	// polls hands an assignments poll to an idle poller (startPoll);
	// pollers counts the pollers started.
	polls   chan pollJob
	pollers atomic.Int64
	mu      struct {
		sync.Mutex
		addrs  []string // base URLs
		cur    int
		leader string // base URL; "" when unknown
		// gone holds, per manager, a channel closed when a call to it
		// fails at the transport (see failed): the poll parked there is
		// given up.
		gone map[string]chan struct{}
		// beatLate is the current manager at which the last heartbeat
		// ran out of time ("" after one that did not): the next one
		// that runs out of time there moves the agent on (callBeat).
		beatLate string
	}
}

// SharedHTTP returns a fasthttp client sized for maxConns connections per
// manager (each agent holds at most one long poll). A call that finds
// every connection busy waits for one (bounded by its own deadline) rather
// than failing at once: when a fleet moves to a new leader together, its
// calls queue instead of failing and retrying.
func SharedHTTP(maxConns int) *fasthttp.Client {
	return &fasthttp.Client{
		Name:                          "shoal-agent",
		MaxConnsPerHost:               max(maxConns, 64),
		MaxConnWaitTimeout:            10 * time.Second,
		MaxIdleConnDuration:           90 * time.Second,
		ReadTimeout:                   6 * time.Minute,
		WriteTimeout:                  30 * time.Second,
		MaxResponseBodySize:           256 << 20,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		RetryIfErr:                    retryOnAnotherConn,
	}
}

// retryOnAnotherConn sends a request again, on another connection, when
// the one it went on was closed or reset under it before any answer: a
// keep-alive the manager closed to make room (api.Guard), or every pooled
// connection to a manager that died. Without it each dead pooled
// connection cost the agent a failed call and a retry delay: after a
// leader kill, agents went through three failed heartbeats before they
// dialled anyone. Every call of the agent protocol may be repeated (the
// manager takes a status, a sync or a heartbeat twice as once). A dial
// that fails is not retried here; nor is a timeout.
func retryOnAnotherConn(_ *fasthttp.Request, attempts int, err error) (resetTimeout, retry bool) {
	return false, attempts <= AgentConnsPerManager && connLost(err)
}

// connLost reports whether err says the connection was closed or reset by
// its peer.
func connLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, fasthttp.ErrConnectionClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// AgentConnsPerManager is how many connections one agent holds to each
// manager at most: its long poll, its heartbeats (to its current manager,
// which relays them to the leader; to the leader itself only when that
// relay fails) and one its short calls take turns on (AgentClient.short). With a connection for
// each of its loops and idle ones kept, 10,000 agents held about 37,000
// connections, and after a leader kill one replica reached its cap
// (api.Guard). Two, with heartbeats taking turns with the reports, let a
// heartbeat wait behind a report waiting for a commit until it timed out,
// and the agent took its leader for gone.
const AgentConnsPerManager = 3

// AgentHTTPS returns the client of one agent: SharedHTTPS with
// AgentConnsPerManager connections per manager (cfg nil: plain HTTP).
func AgentHTTPS(cfg *tls.Config, certLife time.Duration) *fasthttp.Client {
	var hc *fasthttp.Client
	if cfg != nil {
		hc = SharedHTTPS(AgentConnsPerManager, cfg, certLife)
	} else {
		hc = SharedHTTP(AgentConnsPerManager)
	}
	hc.MaxConnsPerHost = AgentConnsPerManager // SharedHTTP's floor is for a fleet's shared pool
	return hc
}

// SharedHTTPS is SharedHTTP speaking TLS with cfg. certLife is the
// lifetime of the client certificate (0: unknown): connections are retired
// after a tenth of it, so one opened with a certificate that a renewal
// replaced is gone before that certificate expires.
//
// Its connections are set up by a dialer of its own (dial.go): a call
// waits for a TLS handshake no longer than its deadline, a handshake it
// gave up serves the next call, and a connection that resumes a session
// offers an X25519 key share only.
func SharedHTTPS(maxConns int, cfg *tls.Config, certLife time.Duration) *fasthttp.Client {
	hc := SharedHTTP(maxConns)
	hc.TLSConfig = cfg
	if cfg != nil {
		hc.DialTimeout = newTLSDialer(cfg, &Dials).dial
	}
	if certLife > 0 {
		hc.MaxConnDuration = max(certLife/10, 100*time.Millisecond)
	}
	return hc
}

// NewAgentClient returns a client of the managers at addrs (host:port or
// http(s)://host:port), sharing hc (nil: a plain HTTP client of its own).
// When hc speaks TLS (its TLSConfig is set), addresses without a scheme
// mean https.
func NewAgentClient(addrs []string, hc *fasthttp.Client) (*AgentClient, error) {
	if hc == nil {
		hc = SharedHTTP(64)
	}
	c := &AgentClient{hc: hc, hosts: hostSetOf(hc), short: make(chan struct{}, 1), polls: make(chan pollJob)}
	if err := c.setManagers(addrs); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *AgentClient) setManagers(addrs []string) error {
	var bases []string
	for _, a := range addrs {
		b, err := baseURL(strings.TrimSpace(a), c.hc.TLSConfig != nil)
		if err != nil {
			return err
		}
		bases = append(bases, b)
	}
	if len(bases) == 0 {
		return errors.New("no manager address: pass --join host:port[,host:port...]")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := ""
	if len(c.mu.addrs) > 0 {
		cur = c.mu.addrs[c.mu.cur]
	}
	c.mu.addrs, c.mu.cur = bases, 0
	for i, b := range bases {
		if b == cur {
			c.mu.cur = i
		}
	}
	return nil
}

// SetManagers replaces the manager list (the server pushes it at session
// start). An empty list is ignored.
func (c *AgentClient) SetManagers(addrs []string) {
	if len(addrs) > 0 {
		_ = c.setManagers(addrs)
	}
}

func (c *AgentClient) current(toLeader bool) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if toLeader && c.mu.leader != "" {
		return c.mu.leader
	}
	return c.mu.addrs[c.mu.cur]
}

// failed moves on from a manager that could not be reached, to another
// one drawn at random: every agent holds the managers in the same order,
// and moving to the next one sent all of a dead manager's agents (three
// connections each) to the same survivor, which ran out of connections.
func (c *AgentClient) failed(base string) { c.moveOn(base, true) }

// moveOn is failed; abandon says whether a poll parked at base is given
// up (not when the failed call is that poll itself: its own failure is
// its answer).
func (c *AgentClient) moveOn(base string, abandon bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.leader == base {
		c.mu.leader = ""
	}
	if ch, ok := c.mu.gone[base]; ok && abandon {
		close(ch)
		delete(c.mu.gone, base)
	}
	if n := len(c.mu.addrs); n > 1 && c.mu.addrs[c.mu.cur] == base {
		c.mu.cur = (c.mu.cur + 1 + rand.IntN(n-1)) % n
	}
}

func (c *AgentClient) setLeader(addr string) {
	b, err := baseURL(addr, c.hc.TLSConfig != nil)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.mu.leader = b
	c.mu.Unlock()
}

// call posts req to path and decodes the answer's frame into ans.
func (c *AgentClient) call(ctx context.Context, path string, toLeader bool, req, ans wire.Message) error {
	return c.callAs(ctx, path, toLeader, callPlain, req, ans, nil)
}

// callKind says how callAs treats a call.
type callKind uint8

const (
	callPlain callKind = iota
	// callPoll is the assignments poll, whose own failure does not
	// abandon it.
	callPoll
	// callBeat is a heartbeat: one that runs out of time at the current
	// manager moves the agent on only when the heartbeat before it did
	// too. A heartbeat goes through the current manager, which relays it
	// to the leader: a late answer there is a busy manager or a slow
	// relay, and during a join storm the agents that moved on at every
	// late heartbeat wandered between managers, leaving connections
	// behind on each (kept 90 s). A manager that is gone (refused, reset)
	// is left at once, as by every call.
	callBeat
	// callOnce is a rare call (a re-report) whose connection is closed
	// after it when it went to a manager other than the current one (the
	// leader): kept, each agent whose current manager follows held an
	// idle connection to the leader for a minute and a half after every
	// session start, about as many as the heartbeats held before they
	// went to the current manager.
	callOnce
)

// callAs is call as kind says; with ans nil, each frame of the answer goes
// to fn instead (an assignments answer, whose frames are joined). A
// message to decode into rather than a closure that does it: that closure
// was one more allocation at every agent call.
func (c *AgentClient) callAs(ctx context.Context, path string, toLeader bool, kind callKind, req, ans wire.Message, fn func(frame []byte) error) error {
	poll := kind == callPoll
	bufs := callBuffers.Get().(*callBufs)
	defer bufs.put()
	body, err := wire.Append(bufs.body[:0], req)
	bufs.body = body
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		base := c.current(toLeader)
		bufs.url = append(append(bufs.url[:0], base...), path...)
		err := c.post(ctx, base, bufs.url, body, kind == callOnce && base != c.current(false), ans, fn)
		if err == nil {
			return nil
		}
		// Declared past the answered case: errors.As takes its address,
		// which put it on the heap at every call.
		var we *wire.Error
		switch {
		case errors.As(err, &we) && we.Code == wire.CodeNotLeader && we.Leader != "" && attempt < 2:
			c.setLeader(we.Leader)
			toLeader = true
			continue
		case errors.As(err, &we) && we.Code == wire.CodeNoQuorum && attempt < 2:
			// That manager is cut off from the cluster: move on from it
			// at once, to the leader it last knew unless that is itself.
			c.moveOn(base, !poll)
			if we.Leader != "" {
				if b, err := baseURL(we.Leader, c.hc.TLSConfig != nil); err == nil && b != base {
					c.setLeader(we.Leader)
				}
			}
			toLeader = false
			continue
		case errors.As(err, &we):
			return err
		}
		if kind == callBeat && c.lateOnce(base, err) {
			return err
		}
		c.moveOn(base, !poll)
		return err
	}
}

// lateOnce reports whether err is a heartbeat's first in a row to run out
// of time at base, the current manager (then the agent stays with it).
func (c *AgentClient) lateOnce(base string, err error) bool {
	var late lateCall
	c.mu.Lock()
	defer c.mu.Unlock()
	if !errors.As(err, &late) || base != c.mu.addrs[c.mu.cur] || c.mu.beatLate == base {
		c.mu.beatLate = ""
		return false
	}
	c.mu.beatLate = base
	return true
}

// beatOK records a heartbeat answered by base.
func (c *AgentClient) beatOK() {
	c.mu.Lock()
	c.mu.beatLate = ""
	c.mu.Unlock()
}

// lateCall is a call that ran out of time (its answer, or its connection's
// set-up, was not there by its deadline) rather than one refused or cut.
type lateCall struct{ error }

func (l lateCall) Unwrap() error { return l.error }

// ranOutOfTime reports whether err, the HTTP client's, says the call's
// time ran out.
func ranOutOfTime(err error) bool {
	return errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, errSetupTimeout) ||
		errors.Is(err, fasthttp.ErrNoFreeConns) || errors.Is(err, context.DeadlineExceeded)
}

// callBufs are one call's request body and URL, kept between calls (the
// HTTP client is done with both when its call returns): every call of
// every agent encoded its request into a new slice, grown by appending.
type callBufs struct{ body, url []byte }

var callBuffers = sync.Pool{New: func() any { return new(callBufs) }}

// put hands b back for another call, unless a big request (a
// re-report listing thousands of tasks) made it too big to keep.
func (b *callBufs) put() {
	if cap(b.body) <= 64<<10 {
		callBuffers.Put(b)
	}
}

// post sends body to rawURL, on base's host client, and decodes every
// frame of the answer into ans (nil: hands each to fn); closeConn asks for
// the connection to be closed after the answer.
func (c *AgentClient) post(ctx context.Context, base string, rawURL []byte, body []byte, closeConn bool, ans wire.Message, fn func([]byte) error) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURIBytes(rawURL)
	url := func() string { return string(rawURL) } // for error messages only
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/x-shoal-wire")
	req.SetBodyRaw(body)
	if closeConn {
		req.SetConnectionClose()
	}
	hc := c.hosts.get(base)
	var err error
	if dl, ok := ctx.Deadline(); ok {
		err = hc.DoDeadline(req, resp, dl)
	} else {
		err = hc.Do(req, resp)
	}
	if err != nil {
		if ranOutOfTime(err) {
			return lateCall{fmt.Errorf("%w at %s: %v", ErrUnreachable, url(), err)}
		}
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, url(), err)
	}
	rest := resp.Body()
	if len(rest) == 0 {
		return fmt.Errorf("%w at %s: empty answer (status %d)", ErrUnreachable, url(), resp.StatusCode())
	}
	for len(rest) > 0 {
		var frame []byte
		if frame, rest, err = wire.Next(rest); err != nil {
			return fmt.Errorf("%w at %s: %v", ErrUnreachable, url(), err)
		}
		if t, _ := wire.PeekType(frame); t == wire.TypeError {
			var we wire.Error
			if err := wire.DecodeInto(frame, &we); err != nil {
				return fmt.Errorf("%w at %s: %v", ErrUnreachable, url(), err)
			}
			return &we
		}
		if ans != nil {
			err = wire.DecodeInto(frame, ans)
		} else {
			err = fn(frame)
		}
		if err != nil {
			return fmt.Errorf("%w at %s: %v", ErrUnreachable, url(), err)
		}
	}
	return nil
}

// CloseIdleConnections closes the client's idle connections (and those of
// every AgentClient sharing its HTTP client); connections in use are left
// alone.
func (c *AgentClient) CloseIdleConnections() { c.hosts.closeIdle() }

// turn waits for the agent's turn at a short call; call endTurn when the
// call is done. A turn that is free is taken without asking ctx for its
// Done channel (an agent's call context sets up its timer only then).
func (c *AgentClient) turn(ctx context.Context) error {
	select {
	case c.short <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.short <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the agent's other call to the managers: %w", ctx.Err())
	}
}

func (c *AgentClient) endTurn() { <-c.short }

// shortCall is call for a short call: one at a time per agent.
func (c *AgentClient) shortCall(ctx context.Context, path string, toLeader bool, req, ans wire.Message) error {
	if err := c.turn(ctx); err != nil {
		return err
	}
	defer c.endTurn()
	return c.call(ctx, path, toLeader, req, ans)
}

// OpenSession opens a session with any manager.
func (c *AgentClient) OpenSession(ctx context.Context, req *wire.SessionRequest) (*wire.Session, error) {
	var s wire.Session
	return &s, c.shortCall(ctx, "/v1/agent/session", false, req, &s)
}

// Heartbeat sends a heartbeat to the current manager, on a connection of
// its own (never behind a short call waiting for a commit). A follower
// relays it to the leader and answers what the leader said; one that
// knows no leader, or whose leader is slow to answer relays, answers
// unavailable (the agent retries later), and one whose leader answered no
// relay for a period answers not_leader naming the leader, and the
// heartbeat goes to the leader directly. Each heartbeat starts at the current manager again: before
// the relay, every agent held a connection to the leader for its
// heartbeats, and after a leader kill the whole fleet dialled the new one
// at once.
func (c *AgentClient) Heartbeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	var a wire.HeartbeatAck
	if err := c.callAs(ctx, "/v1/agent/heartbeat", false, callBeat, hb, &a, nil); err != nil {
		return &a, err
	}
	c.beatOK()
	return &a, nil
}

// Assignments long-polls for the node's assignments; a COMPLETE sent in
// several frames comes back reassembled. It returns as soon as ctx ends:
// the HTTP client cannot cancel a request under way, so the poll is left
// to finish on its own (by its deadline at most) and its answer dropped.
// An agent told to stop otherwise waited for its last poll, up to the
// poll's wait (30 s by default).
func (c *AgentClient) Assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error) {
	poll := func() chan pollAnswer {
		done := make(chan pollAnswer, 1)
		c.startPoll(pollJob{ctx, req, done})
		return done
	}
	base, gone := c.pollTarget()
	done := poll()
	for moved := 0; ; {
		select {
		case r := <-done:
			return r.a, r.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the assignments poll was given up: %w", ErrUnreachable, ctx.Err())
		case <-gone:
			// Another call to the poll's manager failed: poll again
			// where the client points now (at most once per manager)
			// and take that poll's answer; the poll left behind ends by
			// its deadline and its answer is dropped.
			next, ch := c.pollTarget()
			gone = ch
			if next == base || moved >= c.managers() {
				continue
			}
			base, moved = next, moved+1
			done = poll()
		}
	}
}

// pollJob is one assignments poll for a poller: its answer goes to done.
type pollJob struct {
	ctx  context.Context
	req  *wire.AssignmentsRequest
	done chan<- pollAnswer
}

type pollAnswer struct {
	a   *wire.Assignments
	err error
}

// pollerIdle is how long a poller waits for the agent's next poll before
// it ends: an agent polls again as soon as it has applied an answer, or
// after a retry delay of at most a heartbeat period.
const pollerIdle = 30 * time.Second

// startPoll hands job to the agent's idle poller, or starts one. A poll
// runs in a goroutine of its own so that Assignments can return before
// the poll does (the HTTP client cannot cancel it), and that goroutine
// is kept for the agent's next poll: a new goroutine per poll was set up,
// grew its stack from the smallest through the HTTP and TLS code, and
// exited, every time (goroutine set-up and exit 1.4 % and the poll's
// stack growth 1.3 % of the simulated agents' ramp profile; with a kept
// poller 0.6 % and 1.1 %: the collector still shrinks the stack of a
// poller parked on a long poll).
func (c *AgentClient) startPoll(job pollJob) {
	select {
	case c.polls <- job: // an idle poller took it
	default:
		c.pollers.Add(1)
		go c.poller(job)
	}
}

// poller runs job, then every poll handed to it, until none came for
// pollerIdle. A poll the agent gave up keeps its poller until it ends;
// the next poll finds another one or starts one.
func (c *AgentClient) poller(job pollJob) {
	var idle *time.Timer
	for {
		a, err := c.assignments(job.ctx, job.req)
		job.done <- pollAnswer{a, err}
		job = pollJob{} // let the answer and its context go while idle
		if idle == nil {
			idle = time.NewTimer(pollerIdle)
		} else {
			idle.Reset(pollerIdle)
		}
		select {
		case job = <-c.polls:
		case <-idle.C:
			return
		}
	}
}

// managers is how many managers the client knows.
func (c *AgentClient) managers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.addrs)
}

// pollTarget is the manager a poll starts at now, and a channel closed
// when a call to it fails (a heartbeat to it, most often):
// a poll parked on a manager cut off from the agent would otherwise wait
// out its whole deadline (the poll's wait and the call timeout: a minute
// by default) while new work is given out elsewhere.
func (c *AgentClient) pollTarget() (string, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	base := c.mu.addrs[c.mu.cur]
	if c.mu.gone == nil {
		c.mu.gone = make(map[string]chan struct{})
	}
	ch, ok := c.mu.gone[base]
	if !ok {
		ch = make(chan struct{})
		c.mu.gone[base] = ch
	}
	return base, ch
}

// assignments is one assignments poll, answered or failed.
func (c *AgentClient) assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error) {
	var whole *wire.Assignments
	err := c.callAs(ctx, "/v1/agent/assignments", false, callPoll, req, nil, func(f []byte) error {
		var part wire.Assignments
		if err := wire.DecodeInto(f, &part); err != nil {
			return err
		}
		if whole == nil {
			whole = &part
			return nil
		}
		whole.Join(&part)
		return nil
	})
	if err == nil && whole == nil {
		err = fmt.Errorf("%w: the assignments answer held no frame", ErrUnreachable)
	}
	if err == nil && whole.Leader != "" {
		// The manager holding this poll names the cluster's leader:
		// re-reports (and a heartbeat the current manager could not
		// relay) go there.
		c.setLeader(whole.Leader)
	}
	return whole, err
}

// ReportStatus sends a batch of task statuses (a re-report goes to the
// leader, on a connection closed after it unless the leader is the
// current manager).
func (c *AgentClient) ReportStatus(ctx context.Context, b *wire.StatusBatch) (*wire.StatusAck, error) {
	var a wire.StatusAck
	if !b.ReReport {
		return &a, c.shortCall(ctx, "/v1/agent/status", false, b, &a)
	}
	if err := c.turn(ctx); err != nil {
		return &a, err
	}
	defer c.endTurn()
	return &a, c.callAs(ctx, "/v1/agent/status", true, callOnce, b, &a, nil)
}

// Sync reports what the node holds and learns what to destroy.
func (c *AgentClient) Sync(ctx context.Context, req *wire.SyncRequest) (*wire.SyncAnswer, error) {
	var a wire.SyncAnswer
	return &a, c.shortCall(ctx, "/v1/agent/sync", false, req, &a)
}
