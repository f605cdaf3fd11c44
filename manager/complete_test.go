package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/route"
	"shoal/wire"
)

// A COMPLETE assignments frame replaces an agent's whole set, so a replica
// must never render one from a state older than what the cluster
// committed: here replica 3 missed a write while stopped and restarts
// alone, unable to catch up. It must refuse (retry later) rather than
// answer from its old state, and once its peers are back its COMPLETE
// includes the write. (Answered from the lagging state, an agent was
// handed tasks it had already stopped and forgotten, and started them
// again with addresses since given to other tasks.)
func TestCompleteFrameNeverOlderThanTheCluster(t *testing.T) {
	c := startThree(t)
	ctx := ctxT(t)
	c.stop(3)
	created, tok, err := c.client(1).CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(0), Command: []string{"true"}})
	if err != nil {
		t.Fatalf("create while replica 3 is down: %v", err)
	}
	written, err := wire.ParseCursor(tok)
	if err != nil {
		t.Fatal(err)
	}
	g := route.ServiceGroup(created.Spec.Name, 2)
	c.stop(1)
	c.stop(2)
	c.start(3)

	ac, err := client.NewAgentClient([]string{c.ms[2].APIAddr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	complete := func(ctx context.Context) (*wire.Assignments, error) {
		return ac.Assignments(ctx, &wire.AssignmentsRequest{NodeID: 7, SessionID: 11})
	}
	alone, cancel := context.WithTimeout(ctx, 15*time.Second)
	f, err := complete(alone)
	cancel()
	var we *wire.Error
	switch {
	case err == nil:
		t.Fatalf("replica 3, alone and behind, answered a COMPLETE at %v; the cluster had committed group %d up to %d",
			f.ResultsIn, g, written.Get(g))
	case !errors.As(err, &we) || we.Code != wire.CodeUnavailable:
		t.Fatalf("replica 3 alone: want an unavailable error to retry, got %v", err)
	}

	c.start(1)
	c.start(2)
	eventually(t, 30*time.Second, func() (bool, string) {
		f, err := complete(ctx)
		if err != nil {
			return false, err.Error()
		}
		if f.Kind != wire.FrameComplete || f.ResultsIn.Get(g) < written.Get(g) {
			return false, "COMPLETE at " + f.ResultsIn.Token() + ", before the write at " + written.Token()
		}
		return true, ""
	})
}
