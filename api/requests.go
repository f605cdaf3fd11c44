package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/cluster"
	"shoal/statemachine"
)

// writeTimeout is how long the API waits for a user's write to apply.
const writeTimeout = 15 * time.Second

// userWrite is one HTTP write request's identity and deadline, shared by
// every command it submits: the commands' entries can take effect no
// later than notAfter, which the answer tells the user when the outcome is
// not known.
type userWrite struct {
	id       string
	deadline time.Time
	notAfter time.Time
}

const writeKey = "shoal.write"

// write returns the request's userWrite, made at the first call: the
// request ID is the client's (X-Shoal-Request-Id) or a new one that
// carries notAfter, so GET /v1/requests/{id} can tell "not applied" from
// "may still apply" without being told the deadline.
func (s *Server) write(ctx *fasthttp.RequestCtx) (*userWrite, error) {
	if w, ok := ctx.UserValue(writeKey).(*userWrite); ok {
		return w, nil
	}
	w := &userWrite{deadline: time.Now().Add(writeTimeout)}
	w.notAfter = w.deadline.Add(s.cfg.ClockBound)
	w.id = string(ctx.Request.Header.Peek(client.RequestIDHeader))
	if w.id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		w.id = "s" + strconv.FormatInt(w.notAfter.UnixMilli(), 36) + "-" + hex.EncodeToString(b[:])
	} else if err := checkRequestID(w.id); err != nil {
		return nil, err
	}
	ctx.SetUserValue(writeKey, w)
	ctx.Response.Header.Set(client.RequestIDHeader, w.id)
	return w, nil
}

// checkRequestID accepts 1 to 64 letters, digits and . _ : -.
func checkRequestID(id string) error {
	if len(id) == 0 || len(id) > statemachine.MaxRequestIDLen {
		return badRequest("a request ID is 1 to %d characters; %q has %d", statemachine.MaxRequestIDLen, id, len(id))
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			return badRequest("request ID %q may hold only letters, digits and . _ : -", id)
		}
	}
	return nil
}

// notAfterOf reads the time a server-made request ID carries.
func notAfterOf(id string) (time.Time, bool) {
	head, _, ok := strings.Cut(id, "-")
	if !ok || len(head) < 2 || head[0] != 's' {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(head[1:], 36, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// submit proposes one command of a user's write (carrying the write's
// request ID, so it applies at most once however often it is sent) and
// maps its outcome.
func (s *Server) submit(ctx *fasthttp.RequestCtx, cmd statemachine.Command) (statemachine.Result, error) {
	w, err := s.write(ctx)
	if err != nil {
		return statemachine.Result{}, err
	}
	if carriesRequestID(cmd.Kind) {
		cmd.RequestID = w.id
	}
	c, cancel := context.WithDeadline(context.Background(), w.deadline)
	defer cancel()
	res, err := s.cfg.Submitter.Submit(c, cmd)
	if res.Code == statemachine.CodeOK && err != nil && unknownOutcome(err) {
		return res, w.unknown()
	}
	return submitted(res, err)
}

// carriesRequestID: the commands that make a user's change (not the ID
// reservations that precede some of them, which may repeat harmlessly).
func carriesRequestID(k statemachine.CmdKind) bool {
	return k != statemachine.CmdReserveNetworkID && k != statemachine.CmdReserveNodeID
}

// unknownOutcome: the write may have left this replica and may still
// apply (until its deadline): the engine or the wait timed out.
func unknownOutcome(err error) bool {
	return errors.Is(err, cluster.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

func (w *userWrite) unknown() *apiError {
	e := errorf(fasthttp.StatusServiceUnavailable, client.CodeUnknown,
		"the change was sent but not confirmed in time; it cannot take effect after %s: send it again with header %s: %s (it is applied at most once), or ask GET /v1/requests/%s",
		w.notAfter.UTC().Format(time.RFC3339), client.RequestIDHeader, w.id, w.id)
	e.retryAfter = time.Second
	e.requestID, e.deadline, e.notAfter = w.id, w.deadline, w.notAfter
	return e
}

// getRequest answers GET /v1/requests/{id}: applied (where and when), or
// not applied and never will be (its not_after passed in every group), or
// pending. Every group is read linearizably: a replica without a quorum
// answers 503, never a guess.
func (s *Server) getRequest(ctx *fasthttp.RequestCtx, args []string) error {
	id := args[0]
	if err := checkRequestID(id); err != nil {
		return err
	}
	notAfter, known := notAfterOf(id)
	if v := string(ctx.QueryArgs().Peek("not_after")); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badRequest("?not_after=%q is not an RFC 3339 time (the not_after of the unknown_outcome answer)", v)
		}
		notAfter, known = t, true
	}
	c, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	out := client.RequestOutcome{RequestID: id}
	oldest := int64(-1) // the earliest group time
	for g := 0; g <= s.reads.Groups(); g++ {
		var rec statemachine.RequestRecord
		var found bool
		var now int64
		if err := s.reads.Read(c, g, func(st *statemachine.State) {
			rec, found = st.Request(id)
			now = st.LastTime()
		}); err != nil {
			return fromErr(err)
		}
		if oldest < 0 || now < oldest {
			oldest = now
		}
		if found {
			at := time.Unix(0, rec.Time).UTC()
			out.Outcome, out.Group, out.Index, out.AppliedAt, out.ObjectID = client.OutcomeApplied, g, rec.Index, &at, rec.Result.ID
			return s.reply(ctx, fasthttp.StatusOK, nil, out)
		}
	}
	if !known {
		out.Outcome = client.OutcomeNotSeen
		out.Message = "no group applied it in the last ten minutes; pass ?not_after= (from the unknown_outcome answer) to learn whether it still may take effect"
		return s.reply(ctx, fasthttp.StatusOK, nil, out)
	}
	na := notAfter.UTC()
	out.NotAfter = &na
	switch {
	case oldest-notAfter.UnixNano() > statemachine.RequestRetention:
		return errorf(fasthttp.StatusGone, client.CodeForgotten,
			"request %s ended more than ten minutes ago; request IDs are kept ten minutes, so its outcome is no longer known: read the object instead", id)
	case oldest > notAfter.UnixNano():
		out.Outcome = client.OutcomeNotApplied
		out.Message = fmt.Sprintf("no group applied it, and since %s none can: it never took effect; sending it again is safe", na.Format(time.RFC3339))
	default:
		out.Outcome = client.OutcomePending
		out.Message = fmt.Sprintf("no group has applied it yet; it may still take effect until %s: ask again then", na.Format(time.RFC3339))
	}
	return s.reply(ctx, fasthttp.StatusOK, nil, out)
}
