package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A call's context ends as a context.WithTimeout does — at its deadline,
// with its parent, or when canceled — whether Done was asked for before
// or after; a context derived from it ends with it.
func TestCallContextEndsLikeWithTimeout(t *testing.T) {
	a := &Agent{}
	within := func(t *testing.T, ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Done not closed", what)
		}
	}

	t.Run("deadline", func(t *testing.T) {
		c, cancel := a.callCtx(context.Background(), 20*time.Millisecond)
		defer cancel()
		if dl, ok := c.Deadline(); !ok || time.Until(dl) > 20*time.Millisecond {
			t.Fatalf("deadline %v %v", dl, ok)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		within(t, c.Done(), "at the deadline")
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err %v, want the deadline's", err)
		}
	})
	t.Run("deadline passed before Done was asked", func(t *testing.T) {
		c, cancel := a.callCtx(context.Background(), time.Millisecond)
		defer cancel()
		deadline := time.Now().Add(10 * time.Second)
		for c.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err %v, want the deadline's", err)
		}
		within(t, c.Done(), "asked after the deadline")
	})
	t.Run("parent", func(t *testing.T) {
		parent, end := context.WithCancel(context.Background())
		c, cancel := a.callCtx(parent, time.Hour)
		defer cancel()
		derived, stop := context.WithCancel(c)
		defer stop()
		end()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err %v after the parent ended", err)
		}
		within(t, c.Done(), "with the parent")
		within(t, derived.Done(), "derived, with the parent")
	})
	t.Run("parent's earlier deadline", func(t *testing.T) {
		parent, end := context.WithTimeout(context.Background(), time.Minute)
		defer end()
		c, cancel := a.callCtx(parent, time.Hour)
		defer cancel()
		pd, _ := parent.Deadline()
		if d, _ := c.Deadline(); !d.Equal(pd) {
			t.Fatalf("deadline %v, want the parent's %v", d, pd)
		}
	})
	for _, asked := range []bool{false, true} {
		c, cancel := a.callCtx(context.Background(), time.Hour)
		if asked {
			_ = c.Done()
		}
		cancel()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Done asked %v: Err %v after cancel", asked, err)
		}
		within(t, c.Done(), "canceled")
	}
}

// A call whose client never waits on its context (a heartbeat, a status
// report, a sync: the HTTP client reads the deadline) costs two small
// allocations and no timer: context.WithTimeout cost a timer and four
// allocations per call, undone at its end.
func TestCallContextWithoutDoneSetsUpNothing(t *testing.T) {
	a := &Agent{}
	parent, end := context.WithCancel(context.Background())
	defer end()
	_ = parent.Done()
	n := testing.AllocsPerRun(1000, func() {
		c, cancel := a.callCtx(parent, 30*time.Second)
		if _, ok := c.Deadline(); !ok || c.Err() != nil {
			t.Fatal("no deadline")
		}
		cancel()
	})
	if n > 2 {
		t.Fatalf("%.0f allocations per call context, want 2 (the context and its cancel)", n)
	}
}

// BenchmarkCallContext is one call's context that nothing waits on (a
// heartbeat's), beside a session's context as its parent; the WithTimeout
// sub-benchmark is what a call cost before.
func BenchmarkCallContext(b *testing.B) {
	parent, end := context.WithCancel(context.Background())
	defer end()
	_ = parent.Done()
	a := &Agent{}
	b.Run("callCtx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := a.callCtx(parent, 30*time.Second)
			_, _ = c.Deadline()
			cancel()
		}
	})
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := context.WithTimeout(parent, 30*time.Second)
			_, _ = c.Deadline()
			cancel()
		}
	})
}
