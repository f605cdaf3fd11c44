package manager

import (
	"errors"
	"testing"

	"shoal/wire"
)

// A heartbeat that reaches the cluster's leader while its node monitor is
// not running (just elected, the monitor not started yet) is told to retry
// shortly there: never "not the leader" naming the leader itself, which
// the agent counts as a failed heartbeat and backs off from.
func TestLeaderWithoutItsMonitorAsksForARetry(t *testing.T) {
	m, ac, s := oneReplicaSession(t, 0)
	m.mon.StepDown() // the engine still says this replica leads
	_, err := ac.Heartbeat(ctxT(t), &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnavailable || we.RetryAfter <= 0 || we.Leader != "" {
		t.Fatalf("heartbeat at a leader whose monitor is not running: %v (%+v), want %s with a retry delay and no leader named",
			err, we, wire.CodeUnavailable)
	}
}
