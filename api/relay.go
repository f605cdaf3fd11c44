package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/manager/control"
	"shoal/wire"
)

// The heartbeat relay between managers (control/relay.go has the
// protocol): a follower posts the heartbeats its agents sent it to the
// leader's /v1/heartbeats/peer, as wire frames one after another (each a
// Heartbeat); the leader answers one frame per heartbeat, in order, each a
// HeartbeatAck or an Error. Only managers may call it (their
// certificates; no check in --dev and --insecure, as on every endpoint).

// relayPath is the leader's endpoint for relayed heartbeats.
const relayPath = "/v1/heartbeats/peer"

// maxRelayed is the most heartbeats the endpoint takes in one request: a
// follower sends at most control.RelayConfig.MaxBatch (256 by default).
const maxRelayed = 4096

// relayedHeartbeats answers a batch of heartbeats a follower relayed.
func (s *Server) relayedHeartbeats(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		if bodyJSON(ctx) {
			return &wire.Error{Code: wire.CodeUnsupportedMedia, Message: "relayed heartbeats are wire frames only"}
		}
		beats, err := decodeBeats(ctx.PostBody())
		if err != nil {
			return &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
		}
		c, cancel := relayBudget(s.ctx, ctx.Request.Header.Peek(relayWaitHeader), time.Now())
		defer cancel()
		answers := s.agents.RelayedHeartbeats(c, beats)
		msgs := make([]wire.Message, len(answers))
		accepted := 0
		for i, a := range answers {
			if a.Err != nil {
				msgs[i] = wireErr(a.Err)
				continue
			}
			msgs[i] = a.Ack
			accepted++
		}
		s.metrics.relayed.Add(accepted)
		return s.wireReply(ctx, msgs...)
	})(ctx, nil)
}

// relayWaitHeader carries how long the relaying follower waits for the
// answer, in milliseconds: the leader spends at most most of it (relayBudget).
const relayWaitHeader = "X-Shoal-Relay-Wait"

// relayBudget bounds the leader's work on a relayed batch by the wait the
// follower sent, less a fifth (at least 100ms, at most half) for the way
// back; without
// one (or an unreadable one), control.LeaderBeatWait applies.
func relayBudget(parent context.Context, wait []byte, now time.Time) (context.Context, context.CancelFunc) {
	ms, err := strconv.ParseInt(string(wait), 10, 64)
	if err != nil || ms <= 0 {
		return context.WithCancel(parent)
	}
	w := time.Duration(ms) * time.Millisecond
	return context.WithDeadline(parent, now.Add(max(w-max(w/5, 100*time.Millisecond), w/2)))
}

// decodeBeats reads a relayed batch: Heartbeat frames, one after another.
func decodeBeats(body []byte) ([]wire.Heartbeat, error) {
	var beats []wire.Heartbeat
	for rest := body; len(rest) > 0; {
		frame, next, err := wire.Next(rest)
		if err != nil {
			return nil, fmt.Errorf("relayed heartbeats: %v", err)
		}
		if len(beats) == maxRelayed {
			return nil, fmt.Errorf("relayed heartbeats: more than %d in one request", maxRelayed)
		}
		beats = append(beats, wire.Heartbeat{})
		if err := wire.DecodeInto(frame, &beats[len(beats)-1]); err != nil {
			return nil, fmt.Errorf("relayed heartbeats: %v", err)
		}
		rest = next
	}
	if len(beats) == 0 {
		return nil, errors.New("relayed heartbeats: the request holds none")
	}
	return beats, nil
}

// relayLink returns the server's link to the leader, or nil when it does
// not relay (NoRelay, or security on without a peer certificate).
func relayLink(cfg Config) control.LeaderLink {
	switch {
	case cfg.NoRelay:
		return nil
	case cfg.Security == nil:
		return newLeaderLink(nil, cfg.Relay.InFlight)
	case cfg.Security.PeerTLS == nil:
		return nil
	}
	return newLeaderLink(cfg.Security.PeerTLS, cfg.Relay.InFlight)
}

// leaderLink is control.LeaderLink over HTTP: one kept-alive connection to
// the leader per batch in flight, TLS with this manager's certificate when
// security is on.
type leaderLink struct {
	hc     *fasthttp.Client
	scheme string
}

// newLeaderLink returns the link of a manager whose peers speak TLS with
// peerTLS (nil: plain HTTP), holding at most conns connections to a leader.
func newLeaderLink(peerTLS *tls.Config, conns int) *leaderLink {
	l := &leaderLink{scheme: "http://", hc: &fasthttp.Client{
		Name:                          "shoal-relay",
		MaxConnsPerHost:               max(conns, 2),
		MaxConnWaitTimeout:            time.Second,
		MaxIdleConnDuration:           90 * time.Second,
		ReadTimeout:                   10 * time.Second,
		WriteTimeout:                  10 * time.Second,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
	}}
	if peerTLS != nil {
		l.hc.TLSConfig = peerTLS
		l.scheme = "https://"
	}
	return l
}

// RelayHeartbeats posts beats to the leader and decodes its answer to
// each.
func (l *leaderLink) RelayHeartbeats(ctx context.Context, leader string, beats []wire.Heartbeat) ([]control.BeatAnswer, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(l.scheme + leader + relayPath)
	req.Header.SetMethod("POST")
	req.Header.SetContentType(wireContentType)
	body := make([]byte, 0, 24*len(beats))
	for i := range beats {
		var err error
		if body, err = wire.Append(body, &beats[i]); err != nil {
			return nil, err
		}
	}
	req.SetBodyRaw(body)
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(5 * time.Second)
	}
	req.Header.Set(relayWaitHeader, strconv.FormatInt(time.Until(dl).Milliseconds(), 10))
	if err := l.hc.DoDeadline(req, resp, dl); err != nil {
		return nil, err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("the leader answered %d: %s", resp.StatusCode(), relayRefusal(resp.Body()))
	}
	out := make([]control.BeatAnswer, 0, len(beats))
	for rest := resp.Body(); len(rest) > 0; {
		frame, next, err := wire.Next(rest)
		if err != nil {
			return nil, fmt.Errorf("the leader's answer: %v", err)
		}
		rest = next
		t, _ := wire.PeekType(frame)
		switch t {
		case wire.TypeError:
			we := new(wire.Error)
			if err := wire.DecodeInto(frame, we); err != nil {
				return nil, fmt.Errorf("the leader's answer: %v", err)
			}
			out = append(out, control.BeatAnswer{Err: we})
		default:
			ack := new(wire.HeartbeatAck)
			if err := wire.DecodeInto(frame, ack); err != nil {
				return nil, fmt.Errorf("the leader's answer: %v", err)
			}
			out = append(out, control.BeatAnswer{Ack: ack})
		}
	}
	if len(out) != len(beats) {
		return nil, fmt.Errorf("the leader answered %d of %d heartbeats", len(out), len(beats))
	}
	return out, nil
}

// relayRefusal is the message of a refused relay call's answer (a wire
// error, or JSON from the authorization check).
func relayRefusal(body []byte) string {
	if frame, _, err := wire.Next(body); err == nil {
		var we wire.Error
		if wire.DecodeInto(frame, &we) == nil {
			return we.Message
		}
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return string(body)
}
