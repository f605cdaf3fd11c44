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
	type rep struct {
		succ  []uint64
		descs []string
	}
	reps := map[uint64]rep{}
	merged := 0
	known, _ := mcExploreConcrete(t, b, limit, true, func(cur mcStateMeta, next []mcStep) {
		var succ []uint64
		var descs []string
		for _, st := range next {
			k := mcKey(st.after, st.act.metaAfter(cur.m))
			succ = append(succ, k)
			descs = append(descs, fmt.Sprintf("%s -> %x", st.act.desc(), k))
		}
		slices.Sort(succ)
		succ = slices.Compact(succ)
		k := mcKey(cur.s, cur.m)
		r, ok := reps[k]
		if !ok {
			reps[k] = rep{succ, descs}
			return
		}
		merged++
		if !slices.Equal(r.succ, succ) {
			t.Fatalf("two states with key %x have different successors:\nfirst:\n%v\nsecond:\n%v", k, r.descs, descs)
		}
	})
	t.Logf("%d concrete states, %d keys, %d merged states checked", known, len(reps), merged)
	if merged == 0 {
		t.Fatal("no two states shared a key: the check checked nothing")
	}
}

// mcExploreConcrete explores the concrete states of b (told apart by their
// full encoding, no abstraction) breadth first until limit of them are
// known, and gives visit each expanded state with its legal steps. An
// illegal step fails the test when strict and is skipped otherwise. It
// returns how many states it knew and how many of those it never expanded.
func mcExploreConcrete(t *testing.T, b mcBounds, limit int, strict bool, visit func(cur mcStateMeta, next []mcStep)) (known, unexpanded int) {
	c := &mcChecker{b: b, retention: b.retained + 1}
	concKey := func(s *State, m mcMeta) uint64 {
		return xxhash.Sum64(append(s.Canonical(), m.events, m.created))
	}
	init := mcInitial(b, c.retention)
	queue := []mcStateMeta{{init, mcMeta{}}}
	seen := map[uint64]bool{concKey(init, mcMeta{}): true}
	for len(queue) > 0 && len(seen) < limit {
		cur := queue[0]
		queue = queue[1:]
		var next []mcStep
		for _, a := range mcActions(cur.s, cur.m, b, false) {
			after, err := c.apply(cur.s, a)
			if err != nil && strict {
				t.Fatalf("illegal step %q: %v", a.desc(), err)
			}
			if err != nil || after == nil {
				continue
			}
			m := a.metaAfter(cur.m)
			next = append(next, mcStep{act: a, after: after, applied: true})
			if ck := concKey(after, m); !seen[ck] {
				seen[ck] = true
				queue = append(queue, mcStateMeta{after, m})
			}
		}
		visit(cur, next)
	}
	return len(seen), len(queue)
}
