package engine

import (
	"context"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"shoal/route"
)

// Property: the proposer's queue of submissions hands out the entries a
// single queue of every call in submission order would (each entry the
// next calls up to the record and byte limits, the first always), and an
// entry handed out keeps its calls whatever is queued or taken after it;
// close fails exactly the calls never taken.
func TestProposerQueueIsOneQueue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{}.withDefaults()
		cfg.MaxBatchRecords = rapid.IntRange(1, 12).Draw(t, "records")
		cfg.MaxBatchBytes = rapid.IntRange(1, 200).Draw(t, "bytes")
		cfg.MaxQueuedBytes, cfg.MaxInFlightBytes, cfg.MaxInFlightEntries = 1<<40, 1<<40, 1<<30
		p := &proposer{cfg: &cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		p.mu.space = make(chan struct{})
		close(p.done)
		w := &waiter{done: make(chan struct{})}
		var model []call // every queued call not yet taken, in order
		type taken struct{ calls, want []call }
		var entries []taken
		next := 0
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			if rapid.IntRange(0, 2).Draw(t, "op") > 0 {
				cs := make([]call, rapid.IntRange(1, 15).Draw(t, "calls"))
				for i := range cs {
					cs[i] = call{enc: make([]byte, rapid.IntRange(1, 60).Draw(t, "size")), w: w, slot: next}
					next++
				}
				model = append(model, cs...)
				if err := p.enqueue(context.Background(), cs); err != nil {
					t.Fatal(err)
				}
				continue
			}
			calls, size, _ := p.take()
			n, want := 0, 0
			for n < len(model) && n < cfg.MaxBatchRecords && (n == 0 || want+len(model[n].enc) <= cfg.MaxBatchBytes) {
				want += len(model[n].enc)
				n++
			}
			if len(calls) != n || size != want || !slices.EqualFunc(calls, model[:n], sameCall) {
				t.Fatalf("took %d calls (%d bytes): %v; want %d (%d bytes): %v", len(calls), size, slots(calls), n, want, slots(model[:n]))
			}
			if n > 0 {
				entries = append(entries, taken{calls, slices.Clone(model[:n])})
			}
			model = model[n:]
		}
		for i, e := range entries {
			if !slices.EqualFunc(e.calls, e.want, sameCall) {
				t.Fatalf("entry %d changed after it was taken: %v, was %v", i, slots(e.calls), slots(e.want))
			}
		}
		w.out = make([]route.Outcome, next)
		p.close()
		failed := 0
		for _, o := range w.out {
			if o.Failed != nil {
				failed++
			}
		}
		if failed != len(model) {
			t.Fatalf("close failed %d calls; %d were queued", failed, len(model))
		}
	})
}

func sameCall(a, b call) bool { return a.slot == b.slot && len(a.enc) == len(b.enc) && a.w == b.w }

func slots(cs []call) []int {
	var s []int
	for _, c := range cs {
		s = append(s, c.slot)
	}
	return s
}

// BenchmarkProposerQueue: 1,000 agents' status batches of 10 reports
// (20-byte commands) queued in one group while its entry is in flight,
// then taken into entries: B/call and allocs are the queue's own.
func BenchmarkProposerQueue(b *testing.B) {
	const submissions, per = 1000, 10
	cfg := Config{}.withDefaults()
	cfg.MaxInFlightBytes, cfg.MaxInFlightEntries = 1<<40, 1<<30
	w := &waiter{done: make(chan struct{})}
	enc := make([]byte, 20)
	b.ReportAllocs()
	for b.Loop() {
		p := &proposer{cfg: &cfg, kick: make(chan struct{}, 1), stop: make(chan struct{})}
		p.mu.space = make(chan struct{})
		for i := range submissions {
			cs := make([]call, per)
			for j := range cs {
				cs[j] = call{enc: enc, w: w, slot: i*per + j}
			}
			if err := p.enqueue(context.Background(), cs); err != nil {
				b.Fatal(err)
			}
		}
		n := 0
		for {
			calls, _, _ := p.take()
			if calls == nil {
				break
			}
			n += len(calls)
		}
		if n != submissions*per {
			b.Fatalf("took %d calls", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(submissions*per), "ns/call")
}
