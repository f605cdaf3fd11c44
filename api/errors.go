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

// fromErr turns an engine or context error into an answer.
func fromErr(err error) *apiError {
	var ae *apiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, cluster.ErrNotReady), errors.Is(err, cluster.ErrNotProposed),
		errors.Is(err, cluster.ErrRejected), errors.Is(err, context.DeadlineExceeded):
		e := errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable,
			"the cluster has no leader or quorum right now; nothing was changed; retry shortly")
		e.retryAfter = time.Second
		return e
	case errors.Is(err, cluster.ErrTimeout):
		e := errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable,
			"the change was sent but not confirmed in time; it may or may not have been applied: read the object before retrying")
		e.retryAfter = time.Second
		return e
	case errors.Is(err, cluster.ErrClosed):
		e := errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable, "this manager is shutting down; use another manager")
		e.retryAfter = time.Second
		return e
	}
	return errorf(fasthttp.StatusInternalServerError, client.CodeInternalFail, "internal error: %v", err)
}
