package check

import (
	"fmt"
	"slices"
	"strings"

	"shoal/api/client"
)

// GroupComparison is the replicas-agree verdict on one group.
type GroupComparison struct {
	Group int
	Index uint64
	// Problem is empty when every replica holds the same state.
	Problem string
}

// CompareReplicas compares, per group, the state hashes of the replicas'
// statuses (GET /v1/status?hash=true). A group is compared only when every
// status is at the same applied index for it (a replica behind is not a
// disagreement); the others are left out, to be read again.
func CompareReplicas(sts []client.Status) []GroupComparison {
	type at struct {
		index uint64
		hash  string
		rep   uint64
	}
	byGroup := map[int][]at{}
	for _, st := range sts {
		for _, gs := range st.Groups {
			if gs.Hash != "" {
				byGroup[gs.Group] = append(byGroup[gs.Group], at{gs.AppliedIndex, gs.Hash, st.Replica})
			}
		}
	}
	var out []GroupComparison
	for g, xs := range byGroup {
		if len(xs) < 2 || len(xs) < len(sts) || slices.ContainsFunc(xs, func(x at) bool { return x.index != xs[0].index }) {
			continue
		}
		hashes := map[string][]uint64{}
		for _, x := range xs {
			hashes[x.hash] = append(hashes[x.hash], x.rep)
		}
		c := GroupComparison{Group: g, Index: xs[0].index}
		if len(hashes) > 1 {
			var parts []string
			for h, reps := range hashes {
				slices.Sort(reps)
				parts = append(parts, fmt.Sprintf("hash %s on replicas %v", h, reps))
			}
			slices.Sort(parts)
			c.Problem = fmt.Sprintf("group %d at index %d: replicas hold different states: %s", g, c.Index, strings.Join(parts, ", "))
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b GroupComparison) int { return a.Group - b.Group })
	return out
}
