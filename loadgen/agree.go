package loadgen

import (
	"context"
	"time"

	"shoal/api/client"
	"shoal/loadgen/check"
)

// checkReplicasAgree reads every replica's group hashes once the cluster is
// quiet and compares, per group, replicas at the same applied index (a
// replica restored from a snapshot must hold the same state as one that
// never stopped). It reads again, for at most wait, until every group was
// compared.
func (r *run) checkReplicasAgree(ctx context.Context, wait time.Duration) {
	if len(r.cl.APIs()) < 2 {
		r.logf("replicas-agree: one replica, nothing to compare")
		return
	}
	deadline := time.Now().Add(wait)
	done := map[int]bool{}
	groups := 0
	for {
		var sts []client.Status
		for _, addr := range r.cl.APIs() {
			c, err := r.cl.Access.Client(addr)
			if err != nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			st, err := c.StatusHashes(cctx)
			cancel()
			if err == nil {
				sts = append(sts, st)
				groups = max(groups, len(st.Groups))
			}
		}
		for _, c := range check.CompareReplicas(sts) {
			if done[c.Group] {
				continue
			}
			done[c.Group] = true
			if c.Problem != "" {
				r.checker.ReplicasDisagree(c.Problem, time.Now())
			} else {
				r.checker.ReplicasAgree()
			}
		}
		if (groups > 0 && len(done) >= groups) || time.Now().After(deadline) || ctx.Err() != nil {
			if len(done) < groups {
				r.logf("replicas-agree: %d of %d groups compared (the others never had every replica at one index)", len(done), groups)
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
