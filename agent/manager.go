package agent

import (
	"context"
	"errors"
	"time"

	"shoal/wire"
)

// Manager is what the agent needs from the managers; api/client implements
// it over HTTP. Errors wrap a *wire.Error when a manager answered with one
// (errors.As); anything else is a transport error, which the agent retries
// with backoff. The implementation follows redirects to the leader itself.
type Manager interface {
	OpenSession(ctx context.Context, req *wire.SessionRequest) (*wire.Session, error)
	Heartbeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error)
	// Assignments is a long-poll: it answers when the node's assignments
	// moved past req.Cursor or req.Wait passed. It returns one whole frame
	// (a COMPLETE sent in chunks is reassembled; the agent also accepts the
	// chunks one by one, applying the set at the Last one).
	Assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error)
	ReportStatus(ctx context.Context, b *wire.StatusBatch) (*wire.StatusAck, error)
	Sync(ctx context.Context, req *wire.SyncRequest) (*wire.SyncAnswer, error)
	// SetManagers replaces the list of manager addresses to try.
	SetManagers(addrs []string)
}

// ErrNodeRemoved: the cluster removed this node. The agent stops; to join
// again as a new node, start it with an empty data directory.
var ErrNodeRemoved = errors.New("agent: this node was removed from the cluster; to join again as a new node, start the agent with an empty data directory")

// code returns the manager's error code in err, "" for a transport error.
func code(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

// retryAfter returns the manager's Retry-After advice in err, 0 if none.
func retryAfter(err error) time.Duration {
	var we *wire.Error
	if errors.As(err, &we) && we.RetryAfter > 0 {
		return time.Duration(we.RetryAfter)
	}
	return 0
}
