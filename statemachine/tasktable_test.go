package statemachine

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The task table answers as a map of tasks by ID would, after every step
// of a random history of stores, replacements and deletions (IDs of two
// groups, dense and sparse), and so does a copy made in the space of an
// older table (as cloneReusing makes one): the
// lookups, the count, the tasks ranged over, and the chunks it keeps (none
// empty).
func TestPropertyTaskTableIsAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tt, ref, prev := newTaskTable(), map[TaskID]*Task{}, map[TaskID]*Task{}
		id := rapid.Custom(func(t *rapid.T) TaskID {
			group := TaskID(rapid.IntRange(0, 1).Draw(t, "group")) << 48
			return group | TaskID(rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(0, 1<<20)).Draw(t, "seq"))
		})
		check := func(tt *taskTable, ref map[TaskID]*Task) {
			if tt.len() != len(ref) {
				t.Fatalf("table holds %d tasks, map %d", tt.len(), len(ref))
			}
			got := map[TaskID]*Task{}
			var order []TaskID
			for id, tk := range tt.all() {
				if _, dup := got[id]; dup {
					t.Fatalf("task %d ranged over twice", id)
				}
				got[id] = tk
				order = append(order, id)
			}
			if !maps.Equal(got, ref) {
				t.Fatalf("table ranges over %v, map holds %v", got, ref)
			}
			if want := slices.Sorted(maps.Keys(ref)); !slices.Equal(order, want) {
				t.Fatalf("table ranges in the order %v, want %v", order, want)
			}
			// From any ID: the IDs at or above it, in order.
			for _, from := range []TaskID{0, 1, 63, 64, 65, 1 << 48, 1<<48 | 64} {
				var got, want []TaskID
				for id := range tt.from(from) {
					got = append(got, id)
				}
				for _, id := range order {
					if id >= from {
						want = append(want, id)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("from %d ranges over %v, want %v", from, got, want)
				}
			}
			if len(order) > 0 {
				from := order[len(order)/2]
				var got []TaskID
				for id := range tt.from(from) {
					got = append(got, id)
				}
				if !slices.Equal(got, order[len(order)/2:]) {
					t.Fatalf("from %d ranges over %v, want %v", from, got, order[len(order)/2:])
				}
			}
			if !slices.IsSorted(tt.keys) || len(slices.Compact(slices.Clone(tt.keys))) != len(tt.keys) {
				t.Fatalf("chunk keys %v not strictly increasing", tt.keys)
			}
			for k := range tt.chunks {
				if !slices.Contains(tt.keys, k) {
					t.Fatalf("chunk %d not listed in %v", k, tt.keys)
				}
			}
			for k, c := range tt.chunks {
				n := 0
				for _, tk := range c.t {
					if tk != nil {
						n++
					}
				}
				if n == 0 || n != c.n {
					t.Fatalf("chunk %d counts %d tasks and holds %d", k, c.n, n)
				}
			}
		}
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch k := id.Draw(t, "id"); rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				tk := &Task{ID: k}
				tt.set(tk)
				ref[k] = tk
			case 2:
				tt.del(k)
				delete(ref, k)
			case 3:
				if got, want := tt.get(k), ref[k]; got != want {
					t.Fatalf("get(%d) = %v, want %v", k, got, want)
				}
				// A copy of the table made in the space of the table as
				// it was at the last copy (cloneReusing's way): tasks of
				// the same IDs are overwritten, the others dropped.
				old := newTaskTable()
				for id := range prev {
					old.set(&Task{ID: id})
				}
				c := old.reuse()
				want := map[TaskID]*Task{}
				for id, tk := range tt.all() {
					ct := old.get(id)
					if ct == nil {
						ct = new(Task)
					}
					*ct = *tk
					c.set(ct)
					want[id] = ct
				}
				c.dropMissing(&tt)
				check(&c, want)
				if !slices.Equal(c.keys, slices.Sorted(maps.Keys(c.chunks))) {
					t.Fatalf("a copy lists chunks %v, want exactly its own", c.keys)
				}
				prev = maps.Clone(ref)
			}
			for k, want := range ref {
				if got := tt.get(k); got != want {
					t.Fatalf("get(%d) = %v, want %v", k, got, want)
				}
			}
			check(&tt, ref)
		}
	})
}
