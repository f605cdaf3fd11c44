package api

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/internal/callctx"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Monitor is the node monitor as the agent endpoints see it, on the
// cluster group's leader. Heartbeat records a node's heartbeat at now and
// returns how long the node may wait before its next one; it fails with
// cluster.ErrNotMonitoring (not the leader), cluster.ErrMonitorStarting
// (just elected, retry here) or cluster.ErrUnknownNode. Period is the
// heartbeat period told to agents at session start, NodeStatus a node's
// status as the monitor holds it, MarkReReported records that an
// initializing node re-reported its tasks, so its next heartbeat makes it
// ready (false if the node is not known or not initializing), and
// Timers returns the failover grace and the orphan timeout (status).
type Monitor interface {
	Heartbeat(ctx context.Context, node statemachine.NodeID, now time.Time) (ttl time.Duration, err error)
	Period(nodes int) time.Duration
	NodeStatus(node statemachine.NodeID) (statemachine.NodeStatus, bool)
	MarkReReported(node statemachine.NodeID) bool
	Timers() (failoverGrace, orphanTimeout time.Duration)
}

// wireContentType marks bodies that are wire/ frames.
const wireContentType = "application/x-shoal-wire"

// wireFail writes a wire.Error answer.
func (s *Server) wireFail(ctx *fasthttp.RequestCtx, e *wire.Error) {
	status := map[string]int{
		wire.CodeNotLeader: fasthttp.StatusMisdirectedRequest, wire.CodeBusy: fasthttp.StatusServiceUnavailable,
		wire.CodeUnavailable: fasthttp.StatusServiceUnavailable, wire.CodeUnknownSession: fasthttp.StatusNotFound,
		wire.CodeNoQuorum:     fasthttp.StatusServiceUnavailable,
		wire.CodeNodeNotReady: fasthttp.StatusConflict, wire.CodeNodeRemoved: fasthttp.StatusGone,
		wire.CodeBadRequest: fasthttp.StatusBadRequest, wire.CodeForbidden: fasthttp.StatusForbidden,
		wire.CodeUnauthorized: fasthttp.StatusUnauthorized, wire.CodeUnsupportedMedia: fasthttp.StatusUnsupportedMediaType,
	}[e.Code]
	if status == 0 {
		status = fasthttp.StatusInternalServerError
	}
	if e.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", itoa(max(int(time.Duration(e.RetryAfter)/time.Second), 1)))
	}
	ctx.SetStatusCode(status)
	if speaksJSON(ctx) {
		body, _ := wire.EncodeJSON(e)
		ctx.SetContentType(jsonContentType)
		ctx.SetBody(append(body, '\n'))
		return
	}
	body, _ := wire.Append(nil, e)
	ctx.SetContentType(wireContentType)
	ctx.SetBody(body)
}

// wireReply writes one or more frames, or in the JSON dialect one JSON
// message (an answer sent as several frames, a COMPLETE over 1 MiB, is
// one message in JSON).
func (s *Server) wireReply(ctx *fasthttp.RequestCtx, msgs ...wire.Message) error {
	if speaksJSON(ctx) {
		body, err := wire.EncodeJSON(joinFrames(msgs))
		if err != nil {
			return err
		}
		ctx.SetContentType(jsonContentType)
		ctx.SetBody(append(body, '\n'))
		return nil
	}
	bp := replyBufs.Get().(*[]byte)
	defer replyBufs.Put(bp)
	body := (*bp)[:0]
	for _, m := range msgs {
		var err error
		if body, err = wire.Append(body, m); err != nil {
			return err
		}
	}
	ctx.SetContentType(wireContentType)
	ctx.SetBody(body) // copied into the response's own buffer
	if cap(body) <= maxPooledReply {
		*bp = body
	}
	return nil
}

// replyBufs holds the buffers agent answers are encoded in before they
// are copied into the response: encoding into a fresh slice grew it
// several times for every answer. One bigger than maxPooledReply (a
// COMPLETE of thousands of tasks) is not kept.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledReply = 256 << 10

// wireErr maps a cluster error to a wire error (the agent rows of
// clusterErrors).
func wireErr(err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	for _, r := range clusterErrors {
		if r.agent && isAny(err, r.is) {
			return &wire.Error{Code: wire.CodeUnavailable, Message: "the cluster cannot take this right now; retry", RetryAfter: int64(time.Second)}
		}
	}
	return &wire.Error{Code: wire.CodeInternal, Message: err.Error()}
}

// decodeWire reads the request body as one message of m's type: a frame,
// or JSON in the JSON dialect.
func decodeWire(ctx *fasthttp.RequestCtx, m wire.Message) *wire.Error {
	if bodyJSON(ctx) {
		got, err := wire.DecodeJSON(m.Type(), ctx.PostBody())
		if err != nil {
			return &wire.Error{Code: wire.CodeBadRequest, Message: "request is not a valid " + m.Type().String() + " in JSON: " + err.Error()}
		}
		if err := copyMessage(m, got); err != nil {
			return &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
		}
		return nil
	}
	if err := wire.DecodeInto(ctx.PostBody(), m); err != nil {
		return &wire.Error{Code: wire.CodeBadRequest, Message: "request is not a valid " + m.Type().String() + " frame: " + err.Error()}
	}
	return nil
}

// agentHandler adapts a wire handler: its errors become wire.Error answers.
// It first settles the request's dialect (dialect.go): a body that is
// neither a wire frame nor JSON is answered 415.
func (s *Server) agentHandler(h func(ctx *fasthttp.RequestCtx) error) handlerFunc {
	return func(ctx *fasthttp.RequestCtx, _ []string) error {
		if e := settleDialect(ctx); e != nil {
			s.wireFail(ctx, e)
			return nil
		}
		if err := h(ctx); err != nil {
			s.wireFail(ctx, wireErr(err))
		}
		return nil
	}
}

func (s *Server) agentSession(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(s.openSession)(ctx, nil)
}

func (s *Server) openSession(ctx *fasthttp.RequestCtx) error {
	var req wire.SessionRequest
	if e := decodeWire(ctx, &req); e != nil {
		return e
	}
	var err error
	if req.NodeID, err = s.callerNode(ctx, req.NodeID); err != nil {
		return err
	}
	select {
	case s.setups <- struct{}{}:
		defer func() { <-s.setups }()
	default:
		// Spread the retries over a few seconds.
		return &wire.Error{Code: wire.CodeBusy, Message: "too many agents are connecting at once; retry later",
			RetryAfter: int64(time.Second + time.Duration(rand.Int64N(int64(2*time.Second))))}
	}
	c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sess, err := s.agents.OpenSession(c, &req)
	if err != nil {
		return err
	}
	s.metrics.sessions.Inc()
	return s.wireReply(ctx, sess)
}

// managerAddr returns the API address replica id registered in the
// cluster group ("" for 0 or one that registered none).
func (s *Server) managerAddr(id uint64) string {
	if id == 0 {
		return ""
	}
	var addr string
	_ = s.reads.ReadLocal(routing.ClusterGroup, func(st *statemachine.State) { addr = st.Managers()[id] })
	return addr
}

func (s *Server) agentHeartbeat(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		var hb wire.Heartbeat
		if e := decodeWire(ctx, &hb); e != nil {
			return e
		}
		var err error
		if hb.NodeID, err = s.callerNode(ctx, hb.NodeID); err != nil {
			return err
		}
		// The deadline's timer starts only if the heartbeat waits (a
		// status change proposed, a monitor starting): most do not.
		c := callctx.New(context.Background(), time.Now().Add(10*time.Second))
		defer c.Cancel()
		ack, err := s.agents.Heartbeat(c, &hb)
		if err != nil {
			return err
		}
		s.metrics.heartbeats.Inc()
		return s.wireReply(ctx, ack)
	})(ctx, nil)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
