package manager

import (
	"fmt"
	"testing"
	"time"
)

// leaderNamed checks that every replica of c names the cluster group's
// leader and since when it knows it (after begun), and that the leader
// says it leads.
func leaderNamed(t *testing.T, c *cluster, begun time.Time) {
	t.Helper()
	ctx := ctxT(t)
	eventually(t, 10*time.Second, func() (bool, string) {
		var leaders []string
		named := map[uint64]bool{}
		for id := uint64(1); id <= 3; id++ {
			st, err := c.client(id).Status(ctx)
			if err != nil {
				return false, err.Error()
			}
			since, err := time.Parse(time.RFC3339Nano, st.LeaderSince)
			if st.Leader == 0 || err != nil || since.Before(begun) || since.After(time.Now()) {
				return false, fmt.Sprintf("replica %d names leader %d since %q (%v), want a leader and a time since the cluster started", id, st.Leader, st.LeaderSince, err)
			}
			named[st.Leader] = true
			if st.Leading != (st.Leader == id) {
				return false, fmt.Sprintf("replica %d: leading %v, but names %d the leader", id, st.Leading, st.Leader)
			}
			if st.Leading {
				leaders = append(leaders, fmt.Sprint(id))
			}
		}
		return len(leaders) == 1 && len(named) == 1, fmt.Sprintf("replicas leading the cluster group: %v; leaders named: %v", leaders, named)
	})
}
