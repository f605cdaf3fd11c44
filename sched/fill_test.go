package sched

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func genItems(t *rapid.T) []fillItem {
	n := int(rapid.Uint64().Draw(t, "n") % 300)
	items := make([]fillItem, n)
	for i := range items {
		items[i] = fillItem{
			base: rapid.Int64Range(0, 6).Draw(t, "base"),
			room: rapid.Int64Range(0, 8).Draw(t, "room"),
			k1:   rapid.Uint64Range(0, 3).Draw(t, "k1"),
			k2:   rapid.Uint64().Draw(t, "k2"),
			id:   uint64(i),
		}
	}
	return items
}

// selectFirst puts exactly the k smallest items (in tie order) first.
func TestSelectFirst(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		items := genItems(t)
		k := rapid.IntRange(0, len(items)).Draw(t, "k")
		want := slices.Clone(items)
		slices.SortFunc(want, compareItems)
		selectFirst(items, k)
		got := slices.Clone(items[:k])
		slices.SortFunc(got, compareItems)
		if !slices.Equal(got, want[:k]) {
			t.Fatalf("first %d: got %v, want %v", k, got, want[:k])
		}
	})
}

// waterFill gives every item what handing out n tasks one at a time to the
// lowest item with room (ties in tie order) gives it.
func TestWaterFillMatchesOneAtATime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		items := genItems(t)
		n := int64(rapid.Uint64().Draw(t, "tasks") % 1500)
		want := make([]int64, len(items)) // by id
		for range n {
			best := -1
			for i, it := range items {
				if want[i] == it.room {
					continue
				}
				if best < 0 || want[i]+it.base < want[best]+items[best].base ||
					want[i]+it.base == want[best]+items[best].base && compareItems(it, items[best]) < 0 {
					best = i
				}
			}
			if best < 0 {
				break
			}
			want[best]++
		}
		var wantN int64
		for _, k := range want {
			wantN += k
		}
		if got := waterFill(items, n); got != wantN {
			t.Fatalf("gave %d tasks, one at a time gives %d", got, wantN)
		}
		for _, it := range items {
			if it.give != want[it.id] {
				t.Fatalf("item %d (base %d room %d) got %d, want %d", it.id, it.base, it.room, it.give, want[it.id])
			}
		}
	})
}

func TestShare(t *testing.T) {
	for _, c := range []struct {
		res, capacity int64
		want          uint64
	}{
		{0, 100, 0}, {-5, 100, 0}, {25, 100, 1 << 30}, {50, 100, 1 << 31}, {100, 100, 1 << 32},
		{150, 100, 1 << 32}, {1, 0, 1 << 32}, {0, 0, 0}, {1 << 40, 1<<41 + 1, 1<<31 - 1},
	} {
		if got := share(c.res, c.capacity); got != c.want {
			t.Errorf("share(%d, %d) = %d, want %d", c.res, c.capacity, got, c.want)
		}
	}
}
