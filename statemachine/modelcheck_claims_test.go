package statemachine

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// mcClaims lets the workers expanding a chunk skip encoding successors
// that an earlier state of the chunk also reaches. The merge keeps, of the
// successors with one key, the first in state order; a worker encodes a
// successor only while its state is the earliest seen so far to reach the
// key (claim), so the one the merge keeps is always encoded and the merge
// is unchanged (runs stay repeatable). At net events=1, two in three
// encoded successors were such duplicates.
//
// Lock-free: open addressing over atomic keys, each with the least
// claiming state (plus one; 0: none yet) beside it.
type mcClaims struct {
	keys  []atomic.Uint64
	owner []atomic.Int64
	mask  uint64
}

func newMCClaims(capacity int) *mcClaims {
	size := 1024
	for size < 2*capacity {
		size *= 2
	}
	return &mcClaims{keys: make([]atomic.Uint64, size), owner: make([]atomic.Int64, size), mask: uint64(size - 1)}
}

// reset empties the table for a chunk of at most capacity successors; it
// must not run beside claim.
func (c *mcClaims) reset(capacity int) {
	if 2*capacity > len(c.keys) {
		*c = *newMCClaims(capacity)
		return
	}
	for i := range c.keys {
		c.keys[i].Store(0)
		c.owner[i].Store(0)
	}
}

// claim reports whether state q is the earliest so far to reach key k
// (a state that reached k before from an earlier action says no: its
// first successor is the one kept). A full table says yes (it only saves
// work).
func (c *mcClaims) claim(k uint64, q int64) bool {
	if k == 0 {
		k = 1
	}
	i := mcMix(k) & c.mask
	for n := uint64(0); ; n++ {
		if n > c.mask {
			return true
		}
		cur := c.keys[i].Load()
		if cur == 0 && c.keys[i].CompareAndSwap(0, k) {
			break
		}
		if cur == k || c.keys[i].Load() == k {
			break
		}
		i = (i + 1) & c.mask
	}
	for {
		o := c.owner[i].Load()
		if o != 0 && o <= q+1 {
			return false
		}
		if c.owner[i].CompareAndSwap(o, q+1) {
			return true
		}
	}
}

// TestModelCheckClaimsKeepTheFirst: whatever the order in which workers
// claim, the first reacher of every key (in state order, then action
// order) is told to encode, so the merge, which keeps it, finds it.
// Planted bug: "the first to arrive wins" instead of "the least state"
// fails here, since the adversarial order claims the latest states first.
func TestModelCheckClaimsKeepTheFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const states = 5000
	succ := make([][]uint64, states)
	for q := range succ {
		for range 1 + rng.IntN(6) {
			succ[q] = append(succ[q], 1+rng.Uint64N(4000)) // many duplicates, some inside a state
		}
	}
	first := map[uint64][2]int{} // key -> (state, action) of its first reacher
	for q, ks := range succ {
		for a, k := range ks {
			if _, ok := first[k]; !ok {
				first[k] = [2]int{q, a}
			}
		}
	}
	for _, order := range []string{"forward", "backward", "two workers"} {
		c := newMCClaims(states * 6)
		told := make([][]bool, states)
		for q := range told {
			told[q] = make([]bool, len(succ[q]))
		}
		run := func(q int) {
			for a, k := range succ[q] {
				told[q][a] = c.claim(k, int64(q))
			}
		}
		switch order {
		case "forward":
			for q := range states {
				run(q)
			}
		case "backward":
			for q := states - 1; q >= 0; q-- {
				run(q)
			}
		default:
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for q := w; q < states; q += 2 {
						run(q)
					}
				}()
			}
			wg.Wait()
		}
		encoded := 0
		for k, qa := range first {
			if !told[qa[0]][qa[1]] {
				t.Fatalf("%s: key %d's first reacher (state %d, action %d) was told to skip it", order, k, qa[0], qa[1])
			}
		}
		for q := range told {
			for _, y := range told[q] {
				if y {
					encoded++
				}
			}
		}
		t.Logf("%s: %d keys, %d successors encoded", order, len(first), encoded)
		if order == "forward" && encoded != len(first) {
			t.Fatalf("in state order every key is encoded once; %d encoded for %d keys", encoded, len(first))
		}
	}
}
