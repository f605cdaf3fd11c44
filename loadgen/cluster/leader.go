package cluster

import (
	"context"
	"sync"
	"time"

	"shoal/api/client"
)

// Leader returns the replica leading the cluster group (it runs the leader
// duties), nil if none answers so.
func (c *Cluster) Leader(ctx context.Context) *Replica {
	for _, r := range c.Replicas {
		if !r.Alive() {
			continue
		}
		st, err := c.status(ctx, r)
		if err == nil && st.Leading {
			return r
		}
	}
	return nil
}

// FirstLeader asks every live replica at once which replica leads the
// cluster group and since when it knows: the earliest time named for a
// leader other than notLeader and after `after`; ok=false if no replica
// named one. Followers, less busy than a new leader, answer sooner, and
// the time does not move with a late answer.
func (c *Cluster) FirstLeader(ctx context.Context, notLeader uint64, after time.Time) (since time.Time, ok bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range c.Replicas {
		if !r.Alive() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.status(ctx, r)
			if err != nil || st.Leader == 0 || st.Leader == notLeader {
				return
			}
			t, err := time.Parse(time.RFC3339Nano, st.LeaderSince)
			if err != nil || !t.After(after) {
				return
			}
			mu.Lock()
			if !ok || t.Before(since) {
				since, ok = t, true
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return since, ok
}

// statusWait bounds one replica's status answer: a busy replica that takes
// longer counts as not answering, and the caller goes on to the others.
const statusWait = 2 * time.Second

// status asks replica r for its status, within statusWait.
func (c *Cluster) status(ctx context.Context, r *Replica) (client.Status, error) {
	sctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	return c.Access.Status(sctx, r.API)
}
