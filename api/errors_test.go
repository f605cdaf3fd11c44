package api

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/cluster"
	"shoal/wire"
)

// TestClusterErrors pins the one error table: every cluster sentinel,
// wrapped as the engine wraps it, gets its user answer and its agent answer.
func TestClusterErrors(t *testing.T) {
	unavailable := &wire.Error{Code: wire.CodeUnavailable, Message: "the cluster cannot take this right now; retry", RetryAfter: int64(time.Second)}
	for _, c := range []struct {
		err    error
		status int
		code   string
		msg    string
		retry  bool
		agent  *wire.Error
	}{
		{err: fmt.Errorf("group 3: %w", cluster.ErrNotReady), status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "the cluster has no leader or quorum right now; nothing was changed; retry shortly", retry: true, agent: unavailable},
		{err: fmt.Errorf("group 0: %w", cluster.ErrNotProposed), status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "the cluster has no leader or quorum right now; nothing was changed; retry shortly", retry: true, agent: unavailable},
		{err: cluster.ErrRejected, status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "the cluster has no leader or quorum right now; nothing was changed; retry shortly", retry: true, agent: unavailable},
		{err: fmt.Errorf("read: %w", context.DeadlineExceeded), status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "the cluster has no leader or quorum right now; nothing was changed; retry shortly", retry: true, agent: unavailable},
		{err: fmt.Errorf("group 1: %w", cluster.ErrTimeout), status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "the change was sent but not confirmed in time; it may or may not have been applied: read the object before retrying", retry: true, agent: unavailable},
		{err: cluster.ErrClosed, status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "this manager is shutting down; use another manager", retry: true, agent: unavailable},
		{err: fmt.Errorf("%w: replica 2 was removed; give the new one another ID", cluster.ErrMembership), status: fasthttp.StatusConflict, code: client.CodeConflict,
			msg:   "replica 2 was removed; give the new one another ID",
			agent: &wire.Error{Code: wire.CodeInternal, Message: "engine: membership change refused: replica 2 was removed; give the new one another ID"}},
		{err: fmt.Errorf("%w: 7", cluster.ErrNoReplica), status: fasthttp.StatusNotFound, code: client.CodeNotFound, msg: "7",
			agent: &wire.Error{Code: wire.CodeInternal, Message: "engine: no such replica: 7"}},
		{err: fmt.Errorf("%w: group 2", cluster.ErrNoQuorum), status: fasthttp.StatusServiceUnavailable, code: client.CodeUnavailable,
			msg: "group 2; a membership change needs a quorum of the current members running", retry: true,
			agent: &wire.Error{Code: wire.CodeInternal, Message: "engine: the group has no leader with a quorum: group 2"}},
		{err: errors.New("disk on fire"), status: fasthttp.StatusInternalServerError, code: client.CodeInternalFail, msg: "internal error: disk on fire",
			agent: &wire.Error{Code: wire.CodeInternal, Message: "disk on fire"}},
	} {
		e := fromErr(c.err)
		if e.status != c.status || e.code != c.code || e.msg != c.msg || (e.retryAfter > 0) != c.retry {
			t.Errorf("fromErr(%q) = %d %s %q retry=%v; want %d %s %q retry=%v", c.err, e.status, e.code, e.msg, e.retryAfter > 0,
				c.status, c.code, c.msg, c.retry)
		}
		if w := wireErr(c.err); *w != *c.agent {
			t.Errorf("wireErr(%q) = %+v; want %+v", c.err, *w, *c.agent)
		}
	}
	if e := fromErr(badRequest("no")); e.status != fasthttp.StatusBadRequest {
		t.Errorf("an answer already made passes through: got %d", e.status)
	}
}
