package fleet

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Property: whatever the interleaving of the children's batches, the
// merged observations reach the observer each once and in stamp order, so
// a release in one process is seen before a later hold of the address in
// another.
func TestMergeHandsOnInStampOrder(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		kids := 1 + rng.IntN(4)
		rec := &recorder{}
		r := newRemote(kids, obsSink(rec.add), nil)
		// Each child's stream: observations with rising stamps, cut into
		// batches whose promise lies between the batch's last stamp and
		// the next one's, then a final batch promising that nothing follows.
		type feed struct {
			k int
			b obsBatch
		}
		streams := make([][]obsBatch, kids)
		total := 0
		for k := range kids {
			stamp := int64(rng.IntN(5))
			var b obsBatch
			for range rng.IntN(60) {
				stamp += 1 + int64(rng.IntN(10))
				b.Obs = append(b.Obs, obs{Kind: obsRelease, Task: uint64(stamp)<<8 | uint64(k), Stamp: stamp})
				total++
				if rng.IntN(4) == 0 {
					b.Upto = stamp // every later stamp is higher
					streams[k] = append(streams[k], b)
					b = obsBatch{}
				}
			}
			b.Upto = math.MaxInt64
			streams[k] = append(streams[k], b)
		}
		// Interleave the children's batches at random, each child's in order.
		var order []feed
		for {
			var open []int
			for k := range streams {
				if len(streams[k]) > 0 {
					open = append(open, k)
				}
			}
			if len(open) == 0 {
				break
			}
			k := open[rng.IntN(len(open))]
			order = append(order, feed{k, streams[k][0]})
			streams[k] = streams[k][1:]
		}
		for _, f := range order {
			r.merge(f.k, f.b)
		}
		if len(rec.got) != total {
			t.Fatalf("seed %d: %d of %d observations handed on", seed, len(rec.got), total)
		}
		for i := 1; i < len(rec.got); i++ {
			if rec.got[i].Task>>8 < rec.got[i-1].Task>>8 {
				t.Fatalf("seed %d: stamp %d handed on after stamp %d", seed, rec.got[i].Task>>8, rec.got[i-1].Task>>8)
			}
		}
	}
}

// The machine's set-up turns are shared among its fleet processes: four
// processes of 2,500 agents on two CPUs keep the 64 turns each that
// healed a 10,000-agent failover; one process of 1,000 agents gets all
// 256 (with 64 its reconnects took 14 s instead of 6).
func TestSetupTurnsAreTheMachines(t *testing.T) {
	for _, c := range []struct{ per, cpus, shares, want int }{
		{0, 2, 4, 64},
		{0, 2, 1, 256},
		{0, 2, 0, 256},
		{0, 8, 3, 341},
		{-1, 2, 1, 0},
		{1, 1, 5, 1},
		{32, 2, 1, 64},
	} {
		if got := setupTurns(c.per, c.cpus, c.shares); got != c.want {
			t.Errorf("setupTurns(%d per CPU, %d CPUs, %d processes) = %d, want %d", c.per, c.cpus, c.shares, got, c.want)
		}
	}
}
