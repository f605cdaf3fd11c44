package loadgen

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// refuseLeftovers stops a --join run before it starts when the cluster
// already has services or networks named like the plan's (an earlier run
// that did not clean up, or the owner's own), which this run would take
// for its own, or simulated agents' nodes that are not down yet (an
// earlier run that just ended without cleaning up: the scheduler would
// place this run's tasks on them).
func (r *run) refuseLeftovers(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	left, err := r.driver.Leftovers(cctx)
	if err != nil {
		return fmt.Errorf("loadgen: reading the cluster's services and networks: %w", err)
	}
	if len(left) > 0 {
		return fmt.Errorf("loadgen: the cluster already has %s, named like this run's own "+
			"(an earlier loadgen run that did not finish its cleanup?); remove them "+
			"(shoal service rm NAME, then shoal network rm NAME) and run again", list(left))
	}
	nodes, err := r.driver.LiveNodes(cctx, func(name string) bool { return strings.HasPrefix(name, "sim-") })
	if err != nil {
		return fmt.Errorf("loadgen: reading the cluster's nodes: %w", err)
	}
	if len(nodes) > 0 {
		return fmt.Errorf("loadgen: %s: simulated agents of an earlier loadgen run that are not down yet "+
			"(this run's tasks would be placed on them); wait until they are down, then remove them "+
			"(shoal node rm ID), and run again", list(nodes))
	}
	return nil
}

// list joins the first five items and says how many more there are.
func list(items []string) string {
	if len(items) > 5 {
		items = append(items[:5:5], fmt.Sprintf("and %d more", len(items)-5))
	}
	return strings.Join(items, ", ")
}

// cleanup takes the run away from a cluster it joined: its nodes are
// paused (nothing new lands on them), its services removed while its
// simulated agents are still there to confirm the shutdowns, then its
// networks; then the agents stop and their nodes are removed once the
// cluster sees them down. What it could not remove it names.
func (r *run) cleanup(ctx context.Context) {
	t0 := time.Now()
	r.setPhase("cleanup")
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	nodes := r.fleet.Nodes()
	if err := r.driver.PauseNodes(cctx, nodes); err != nil {
		r.logf("%v", err)
	}
	r.logf("removing this run's services, then its networks: a network goes once the agents' syncs " +
		"confirm its addresses released (the agents are asked to sync every 2 s meanwhile, their turns spread over those 2 s)")
	// The agents sync on their own once per the managers' --sync-interval
	// (±50 %): a minute by default, which the networks would wait for.
	syncs, stopSyncs := context.WithCancel(cctx)
	syncsDone := make(chan struct{})
	go func() {
		defer close(syncsDone)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-syncs.Done():
				return
			case <-t.C:
				r.fleet.SyncNow(2 * time.Second)
			}
		}
	}()
	err := r.driver.Cleanup(cctx)
	stopSyncs()
	<-syncsDone
	if err != nil {
		r.logf("%v", err)
	} else {
		r.logf("removed this run's %d services and %d networks from the cluster in %.1fs",
			len(r.plan.Services), len(r.plan.Networks), time.Since(t0).Seconds())
	}
	r.fleet.Stop()
	t1 := time.Now()
	removed, err := r.driver.RemoveNodes(cctx, nodes)
	if err != nil {
		r.logf("%v", err)
	}
	r.logf("removed %d of the run's %d nodes once they were down (%.1fs)", removed, len(nodes), time.Since(t1).Seconds())
}
