package statemachine

import (
	"bytes"
	"reflect"
	"testing"
)

// TestCloneIsolatesSharedPools: Clone shares address pools and each state
// copies one before changing it (poolW). For every step the net-mode model
// checker takes from the states it reaches first (each changes pools in
// its own way: allocation, release, sync, orphan, VIPs), applying the
// step to a clone leaves the source as it was, and applying it to the
// source leaves a clone taken before as it was. A change to a pool that
// does not go through poolW fails here, and so does a step whose result on
// a clone differs from its result on a copy decoded afresh.
func TestCloneIsolatesSharedPools(t *testing.T) {
	b := mcBounds{nodes: 2, replicas: 2, retained: 1, events: 1, net: true}
	c := &mcChecker{b: b, retention: b.retained + 1}
	init := mcInitial(b, c.retention)
	queue := []mcStateMeta{{init, mcMeta{}}}
	seen := map[uint64]bool{mcKey(init, mcMeta{}): true}
	steps, poolSteps := 0, 0
	for len(queue) > 0 && len(seen) < 3000 {
		cur := queue[0]
		queue = queue[1:]
		for _, a := range mcActions(cur.s, cur.m, b, false) {
			want := cur.s.Canonical()
			after, err := c.apply(cur.s, a)
			if err != nil {
				t.Fatalf("illegal step %q: %v", a.desc(), err)
			}
			if got := cur.s.Canonical(); !bytes.Equal(got, want) {
				t.Fatalf("%q applied to a clone changed its source", a.desc())
			}
			// The other way: the source changes, a clone taken before
			// must not. The source is a clone itself (cur.s stays).
			src := cur.s.Clone()
			kept := src.Clone()
			src.Apply([]Command{a.cmd}, 0, a.time(), &Output{})
			if got := kept.Canonical(); !bytes.Equal(got, want) {
				t.Fatalf("%q applied to a source changed a clone taken before", a.desc())
			}
			// A clone changes as a state decoded afresh does.
			fresh, err := FromCanonical(want)
			if err != nil {
				t.Fatal(err)
			}
			fresh.Apply([]Command{a.cmd}, 0, a.time(), &Output{})
			kept.Apply([]Command{a.cmd}, 0, a.time(), &Output{})
			if !bytes.Equal(kept.Canonical(), fresh.Canonical()) {
				t.Fatalf("%q applied to a clone and to a decoded copy gives different states", a.desc())
			}
			if after == nil {
				continue
			}
			steps++
			for id, p := range after.pools {
				if p != cur.s.pools[id] {
					poolSteps++ // this step copied a pool: it changed one
					break
				}
			}
			m := a.metaAfter(cur.m)
			if k := mcKey(after, m); !seen[k] {
				seen[k] = true
				queue = append(queue, mcStateMeta{after, m})
			}
		}
	}
	t.Logf("%d steps, %d of them changed a pool", steps, poolSteps)
	if poolSteps == 0 || poolSteps == steps {
		t.Fatal("either no step changed a pool or every step copied one: the check checked nothing")
	}
}

// TestCloneReusingEqualsClone: a copy made in the space of another state
// (cloneReusing, as the model checker makes them) equals Clone's, field by
// field, and a step applied to each gives the same state, whatever state
// lent its space (one before, after or beside the source, with more or
// fewer tasks, services and slots). A field Clone copies and
// cloneReusing leaves stale fails here.
func TestCloneReusingEqualsClone(t *testing.T) {
	b := mcBounds{nodes: 2, replicas: 2, retained: 1, events: 1, net: true}
	c := &mcChecker{b: b, retention: b.retained + 1}
	init := mcInitial(b, c.retention)
	queue := []mcStateMeta{{init, mcMeta{}}}
	seen := map[uint64]bool{mcKey(init, mcMeta{}): true}
	var spaces []*State // states to lend their space, in the order found
	compared := 0
	for len(queue) > 0 && len(seen) < 2000 {
		cur := queue[0]
		queue = queue[1:]
		for i, a := range mcActions(cur.s, cur.m, b, false) {
			want := cur.s.Clone()
			old := cur.s.Clone() // a space of the same shape
			if len(spaces) > 0 {
				old = spaces[(compared+i)%len(spaces)].Clone()
			}
			got := cur.s.cloneReusing(old)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("a copy made in another state's space differs from Clone's:\n%s\nwant:\n%s", mcDump(got), mcDump(want))
			}
			var wantOut, gotOut Output
			want.Apply([]Command{a.cmd}, 0, a.time(), &wantOut)
			got.Apply([]Command{a.cmd}, 0, a.time(), &gotOut)
			if !bytes.Equal(got.Canonical(), want.Canonical()) || !reflect.DeepEqual(gotOut, wantOut) {
				t.Fatalf("%q gives a different result on a copy made in another state's space", a.desc())
			}
			compared++
			after, err := c.apply(cur.s, a)
			if err != nil || after == nil {
				continue
			}
			m := a.metaAfter(cur.m)
			if k := mcKey(after, m); !seen[k] {
				seen[k] = true
				queue = append(queue, mcStateMeta{after, m})
				spaces = append(spaces, after)
			}
		}
	}
	t.Logf("%d copies compared", compared)
}
