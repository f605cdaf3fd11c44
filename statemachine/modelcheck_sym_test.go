package statemachine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestModelCheckKeyIsBisimulation checks the claim the state key rests on:
// two states with one key have the same futures (up to the renamings the
// key abstracts: nodes, task IDs in order, sequence numbers by
// translation). It explores concrete states (told apart by their full
// encoding, no abstraction) in net mode with a disconnect, and for every
// two with one key checks that their successors have the same keys: by
// induction, then, their futures have the same keys, so exploring one is
// enough. A key that merged states with different futures (a reduction
// that hides behaviour) fails here.
func TestModelCheckKeyIsBisimulation(t *testing.T) {
	for _, net := range []bool{true, false} {
		t.Run(fmt.Sprintf("net=%v", net), func(t *testing.T) {
			mcCheckKeyBisimulation(t, mcBounds{nodes: 2, replicas: 2, retained: 1, events: 1, net: net}, 6000)
		})
	}
}

func mcCheckKeyBisimulation(t *testing.T, b mcBounds, limit int) {
	c := &mcChecker{b: b, retention: b.retained + 1}
	type conc struct {
		s *State
		m mcMeta
	}
	concKey := func(s *State, m mcMeta) uint64 {
		return xxhash.Sum64(append(s.Canonical(), m.events, m.created))
	}
	init := mcInitial(b, c.retention)
	queue := []conc{{init, mcMeta{}}}
	seen := map[uint64]bool{concKey(init, mcMeta{}): true}
	type rep struct {
		succ  []uint64
		descs []string
	}
	reps := map[uint64]rep{}
	merged := 0
	for len(queue) > 0 && len(seen) < limit {
		cur := queue[0]
		queue = queue[1:]
		var succ []uint64
		var descs []string
		for _, a := range mcActions(cur.s, cur.m, b, false) {
			after, err := c.apply(cur.s, a)
			if err != nil {
				t.Fatalf("illegal step %q: %v", a.desc(), err)
			}
			if after == nil {
				continue
			}
			m := a.metaAfter(cur.m)
			k := mcKey(after, m)
			succ = append(succ, k)
			descs = append(descs, fmt.Sprintf("%s -> %x", a.desc(), k))
			if ck := concKey(after, m); !seen[ck] {
				seen[ck] = true
				queue = append(queue, conc{after, m})
			}
		}
		slices.Sort(succ)
		succ = slices.Compact(succ)
		k := mcKey(cur.s, cur.m)
		r, ok := reps[k]
		if !ok {
			reps[k] = rep{succ, descs}
			continue
		}
		merged++
		if !slices.Equal(r.succ, succ) {
			t.Fatalf("two states with key %x have different successors:\nfirst:\n%v\nsecond:\n%v", k, r.descs, descs)
		}
	}
	t.Logf("%d concrete states, %d keys, %d merged states checked", len(seen), len(reps), merged)
	if merged == 0 {
		t.Fatal("no two states shared a key: the check checked nothing")
	}
}
