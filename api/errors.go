package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/cluster"
	"shoal/statemachine"
)

// apiError is an answer the user API gives instead of a document.
type apiError struct {
	status     int
	code       string
	msg        string
	field      string
	retryAfter time.Duration
	// With unknown_outcome: the write's request ID and times.
	requestID          string
	deadline, notAfter time.Time
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(fasthttp.StatusBadRequest, client.CodeMalformed, format, args...)
}

func notFound(format string, args ...any) *apiError {
	return errorf(fasthttp.StatusNotFound, client.CodeNotFound, format, args...)
}

func invalidSpec(field, format string, args ...any) *apiError {
	e := errorf(fasthttp.StatusUnprocessableEntity, client.CodeInvalidSpec, format, args...)
	e.field = field
	return e
}

// codeTable maps the state machine's rejections to HTTP answers.
var codeTable = map[statemachine.Code]struct {
	status int
	code   string
}{
	statemachine.CodeInvalid:        {fasthttp.StatusUnprocessableEntity, client.CodeInvalidSpec},
	statemachine.CodeNotFound:       {fasthttp.StatusNotFound, client.CodeNotFound},
	statemachine.CodeExists:         {fasthttp.StatusConflict, client.CodeConflict},
	statemachine.CodeNotAllowed:     {fasthttp.StatusConflict, client.CodeConflict},
	statemachine.CodeNodeNotReady:   {fasthttp.StatusConflict, client.CodeConflict},
	statemachine.CodeWrongComponent: {fasthttp.StatusConflict, client.CodeConflict},
	statemachine.CodeLowerRank:      {fasthttp.StatusConflict, client.CodeConflict},
	statemachine.CodeWrongNode:      {fasthttp.StatusConflict, client.CodeConflict},
	statemachine.CodeStale:          {fasthttp.StatusConflict, client.CodeStale},
	statemachine.CodeCorrupt:        {fasthttp.StatusInternalServerError, client.CodeInternalFail},
	statemachine.CodeExpired:        {fasthttp.StatusServiceUnavailable, client.CodeUnavailable},
}

// fromResult turns a rejected command into an answer (nil on success).
func fromResult(r statemachine.Result) *apiError {
	if r.Code == statemachine.CodeOK {
		return nil
	}
	m, ok := codeTable[r.Code]
	if !ok {
		m.status, m.code = fasthttp.StatusInternalServerError, client.CodeInternalFail
	}
	return &apiError{status: m.status, code: m.code, msg: r.Msg}
}

// clusterErrors is the one table of the cluster's errors (package
// cluster's sentinels, and a context's deadline) an answer maps, first
// match first: the user API's status, code and message, whether it says
// Retry-After, and whether the agent protocol answers it unavailable
// (agent; otherwise the agent gets an internal error).
var clusterErrors = []struct {
	is     []error
	status int
	code   string
	msg    func(err error) string
	retry  bool
	agent  bool
}{
	{is: []error{cluster.ErrMembership}, status: fasthttp.StatusConflict, code: client.CodeConflict, msg: userText},
	{is: []error{cluster.ErrNoReplica}, status: fasthttp.StatusNotFound, code: client.CodeNotFound, msg: userText},
	{is: []error{cluster.ErrNoQuorum}, status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable, retry: true,
		msg: func(err error) string {
			return userText(err) + "; a membership change needs a quorum of the current members running"
		}},
	{is: []error{cluster.ErrNotReady, cluster.ErrNotProposed, cluster.ErrRejected, context.DeadlineExceeded},
		status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable, retry: true, agent: true,
		msg: text("the cluster has no leader or quorum right now; nothing was changed; retry shortly")},
	{is: []error{cluster.ErrTimeout}, status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable, retry: true, agent: true,
		msg: text("the change was sent but not confirmed in time; it may or may not have been applied: read the object before retrying")},
	{is: []error{cluster.ErrClosed}, status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable, retry: true, agent: true,
		msg: text("this manager is shutting down; use another manager")},
}

func text(msg string) func(error) string { return func(error) string { return msg } }

// isAny reports whether err matches one of targets.
func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// fromErr turns a cluster or context error into an answer (clusterErrors).
func fromErr(err error) *apiError {
	var ae *apiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	}
	for _, r := range clusterErrors {
		if isAny(err, r.is) {
			e := &apiError{status: r.status, code: r.code, msg: r.msg(err)}
			if r.retry {
				e.retryAfter = time.Second
			}
			return e
		}
	}
	return errorf(fasthttp.StatusInternalServerError, client.CodeInternalFail, "internal error: %v", err)
}

// userText drops the "engine: ..." sentinel prefix a membership error's
// message starts with.
func userText(err error) string {
	msg := err.Error()
	for _, s := range []error{cluster.ErrMembership, cluster.ErrNoReplica, cluster.ErrNoQuorum} {
		if p := s.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
			return msg[len(p):]
		}
	}
	return msg
}
