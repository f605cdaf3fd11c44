package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// A write submitted through a follower while the leader dies is proposed
// again at the new leader as soon as one is known, instead of waiting out
// the proposal timeout, and is applied exactly once: node IDs reserved
// through it come out consecutive, none lost to a second application.
// Reads through the follower (read index) are asked again the same way.
func TestProposalRetriedAtNewLeader(t *testing.T) {
	cfg := testConfig(1)
	cfg.ProposeTimeout = 20 * time.Second
	l := startLocal(t, 3, cfg)
	leader, ok := l.Engine(1).Leader(route.ClusterGroup)
	if !ok {
		t.Fatal("no leader after WaitReady")
	}
	follower := l.Engine(leader%3 + 1)

	var done atomic.Int32
	type outcome struct {
		id   uint64
		took time.Duration
		err  error
	}
	results := make(chan outcome, 1024)
	go func() {
		defer close(results)
		for i := 0; i < 400; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			res, err := follower.Submit(ctx, statemachine.Command{Kind: statemachine.CmdReserveNodeID})
			if err == nil && i%2 == 1 {
				// Linearizable reads through the follower too.
				err = follower.Read(ctx, route.ClusterGroup, func(*statemachine.State) {})
			}
			cancel()
			results <- outcome{res.ID, time.Since(start), err}
			done.Add(1)
		}
	}()
	eventually(t, 30*time.Second, func() (bool, string) { return done.Load() >= 50, fmt.Sprint(done.Load(), " writes") })
	l.Stop(leader)

	var worst time.Duration
	var prev uint64
	n := 0
	for o := range results {
		if o.err != nil {
			t.Fatalf("write %d: %v", n, o.err)
		}
		if n > 0 && o.id != prev+1 {
			t.Fatalf("write %d reserved ID %d after %d: an entry was applied twice (or lost)", n, o.id, prev)
		}
		prev, worst = o.id, max(worst, o.took)
		n++
	}
	// The election takes 0.8-1.6s; the proposal timeout is 20s.
	if worst > 6*time.Second {
		t.Fatalf("slowest write took %s: a lost proposal waited for its timeout", worst)
	}
	// Whether the write in flight at the stop was proposed again or only
	// refused while there was no leader (and tried again once there was)
	// depends on timing; either way it must not have waited out its
	// timeout, which the bound above checks (without the re-proposal the
	// slowest write took the full 20s).
	re := follower.props[route.ClusterGroup].reproposed.Load()
	t.Logf("slowest write %s; entries proposed again after the leader change: %d", worst, re)
}
