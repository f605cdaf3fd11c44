package manager

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/wire"
)

// A heartbeat that reaches the cluster's leader while its node monitor is
// not running (just elected, the monitor not started yet) is told to retry
// shortly there: never "not the leader" naming the leader itself, which
// the agent counts as a failed heartbeat and backs off from.
func TestLeaderWithoutItsMonitorAsksForARetry(t *testing.T) {
	m, err := Start(Options{DataDir: t.TempDir(), ReplicaID: 1, Groups: 1, RaftLogLevel: "critical",
		APIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := ctxT(t)
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	ac, err := client.NewAgentClient([]string{m.APIAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s *wire.Session
	eventually(t, 10*time.Second, func() (bool, string) {
		s, err = ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "n1", CPU: 1000, Memory: 1 << 30}})
		if err == nil {
			_, err = ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID})
		}
		return err == nil, fmt.Sprintf("open a session and heartbeat: %v", err)
	})

	m.mon.StepDown() // the engine still says this replica leads
	_, err = ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnavailable || we.RetryAfter <= 0 || we.Leader != "" {
		t.Fatalf("heartbeat at a leader whose monitor is not running: %v (%+v), want %s with a retry delay and no leader named",
			err, we, wire.CodeUnavailable)
	}
}
