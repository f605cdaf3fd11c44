package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"shoal/route"
)

// The proposer's batches respect the record and byte limits, and it stops
// taking while the in-flight entry limit is reached; submitters block while
// the queue is full.
func TestProposerLimits(t *testing.T) {
	cfg := Config{MaxBatchRecords: 3, MaxBatchBytes: 100, MaxInFlightBytes: 1 << 20,
		MaxInFlightEntries: 2, MaxQueuedBytes: 400}
	p := &proposer{cfg: &cfg}
	p.mu.space = make(chan struct{})
	w := &waiter{done: make(chan struct{})}
	calls := func(n, size int) []call {
		cs := make([]call, n)
		for i := range cs {
			cs[i] = call{enc: make([]byte, size), w: w}
		}
		return cs
	}
	ctx := context.Background()
	if err := p.enqueue(ctx, calls(10, 40)); err != nil {
		t.Fatal(err)
	}
	b1, s1, _ := p.take()
	if len(b1) != 2 || s1 != 80 {
		t.Fatalf("first batch: %d calls, %d bytes; want 2 calls (the byte limit), 80 bytes", len(b1), s1)
	}
	if b2, _, _ := p.take(); len(b2) != 2 {
		t.Fatalf("second batch: %d calls", len(b2))
	}
	b3, _, wait := p.take()
	if b3 != nil || wait == nil {
		t.Fatal("with two entries in flight the proposer must wait")
	}
	w.out = make([]route.Outcome, 100)
	w.left.Store(100)
	p.finish(b1, s1, func(int) route.Outcome { return route.Outcome{} })
	select {
	case <-wait:
	default:
		t.Fatal("finishing an entry must wake the proposer")
	}
	if b3, _, _ = p.take(); len(b3) != 2 {
		t.Fatalf("after a finish: %d calls", len(b3))
	}

	if err := p.enqueue(ctx, calls(5, 40)); err != nil { // 4 queued + 5 = 360 bytes
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.enqueue(short, calls(2, 40)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("enqueue onto a full queue: got %v, want to block until the deadline", err)
	}
}
