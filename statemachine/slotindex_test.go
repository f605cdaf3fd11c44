package statemachine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A slot index holds what a map of the same sets and deletes holds, and
// ranges over it in increasing slot number, whatever mix of small numbers
// (the slice) and far ones (the map) it is given.
func TestSlotIndexIsAMap(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		var x slotIndex
		ref := map[uint32]*slot{}
		for step := range 400 {
			var n uint32
			switch rng.IntN(4) {
			case 0:
				n = uint32(rng.IntN(1 << 20)) // far: a node ID of a large cluster
			case 1:
				// A window that doubles every 40 steps: numbers beyond
				// twice the slice go to the map, and the slice later
				// grows over them.
				n = uint32(rng.IntN(64 << (step / 40)))
			default:
				n = uint32(rng.IntN(3 * (len(ref) + 8)))
			}
			if rng.IntN(3) == 0 {
				x.del(n)
				delete(ref, n)
			} else {
				sl := &slot{live: int32(step)}
				x.set(n, sl)
				ref[n] = sl
			}
			if x.len() != len(ref) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, x.len(), len(ref))
			}
			probe := []uint32{n, n + 1, uint32(rng.IntN(1 << 20)), uint32(rng.IntN(64 << (step / 40)))}
			for _, k := range probe {
				if x.get(k) != ref[k] {
					t.Fatalf("seed %d step %d: slot %d is %p, want %p", seed, step, k, x.get(k), ref[k])
				}
			}
		}
		if got, want := x.keys(), sortedKeys(ref); !slices.Equal(got, want) {
			t.Fatalf("seed %d: keys %v, want %v", seed, got, want)
		}
		for n, sl := range x.all() {
			if ref[n] != sl {
				t.Fatalf("seed %d: all gives slot %d as %p, want %p", seed, n, sl, ref[n])
			}
		}
	}
}
