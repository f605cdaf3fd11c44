package callctx

import (
	"context"
	"errors"
	"testing"
	"time"
)

func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Done not closed", what)
	}
}

// The context ends as a context.WithTimeout does: at its deadline, with
// its parent, or when canceled, whether Done was asked for before or
// after; a context derived from it ends with it.
func TestEndsLikeWithTimeout(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		c, cancel := WithTimeout(context.Background(), 20*time.Millisecond)
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
		c, cancel := WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		defer cancel()
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err %v, want the deadline's", err)
		}
		within(t, c.Done(), "asked after the deadline")
	})
	t.Run("parent", func(t *testing.T) {
		parent, end := context.WithCancel(context.Background())
		c, cancel := WithTimeout(parent, time.Hour)
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
		c, cancel := WithTimeout(parent, time.Hour)
		defer cancel()
		pd, _ := parent.Deadline()
		if d, _ := c.Deadline(); !d.Equal(pd) {
			t.Fatalf("deadline %v, want the parent's %v", d, pd)
		}
	})
	t.Run("value", func(t *testing.T) {
		type key struct{}
		c, cancel := WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Hour)
		defer cancel()
		if c.Value(key{}) != "v" {
			t.Fatal("the parent's value is lost")
		}
		_ = c.Done()
		if c.Value(key{}) != "v" {
			t.Fatal("the parent's value is lost once Done was asked")
		}
	})
	for _, asked := range []bool{false, true} {
		c, cancel := WithTimeout(context.Background(), time.Hour)
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

// A context nothing waits on costs two small allocations and no timer
// (context.WithTimeout: a timer and more allocations, undone at its end).
func TestWithoutDoneSetsUpNothing(t *testing.T) {
	n := testing.AllocsPerRun(1000, func() {
		c, cancel := WithTimeout(context.Background(), 30*time.Second)
		if _, ok := c.Deadline(); !ok || c.Err() != nil {
			t.Fatal("no deadline")
		}
		cancel()
	})
	if n > 2 {
		t.Fatalf("%.0f allocations per context, want 2 (the context and its cancel)", n)
	}
	n = testing.AllocsPerRun(1000, func() {
		c := New(context.Background(), time.Now().Add(30*time.Second))
		if _, ok := c.Deadline(); !ok || c.Err() != nil {
			t.Fatal("no deadline")
		}
		c.Cancel()
	})
	if n > 1 {
		t.Fatalf("%.0f allocations per context made with New, want 1", n)
	}
}

// BenchmarkContext is a call's context that nothing waits on; the
// WithTimeout sub-benchmark is the standard one.
func BenchmarkContext(b *testing.B) {
	b.Run("callctx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := WithTimeout(context.Background(), 30*time.Second)
			_, _ = c.Deadline()
			cancel()
		}
	})
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = c.Deadline()
			cancel()
		}
	})
}

// Err, once it said why the context ended, says the same from then on (as
// the context package promises), whatever ends it again afterwards: a
// cancel or the parent's end after the deadline passed, or Done asked for
// after a cancel.
func TestErrStaysOnceSet(t *testing.T) {
	t.Run("cancel after the deadline", func(t *testing.T) {
		c := New(context.Background(), time.Now().Add(-time.Millisecond))
		first := c.Err()
		c.Cancel()
		if err := c.Err(); err != first {
			t.Fatalf("Err %v after a cancel, was %v", err, first)
		}
	})
	t.Run("parent ends after the deadline", func(t *testing.T) {
		parent, stop := context.WithCancel(context.Background())
		c := New(parent, time.Now().Add(-time.Millisecond))
		defer c.Cancel()
		first := c.Err()
		stop()
		if err := c.Err(); err != first {
			t.Fatalf("Err %v after the parent ended, was %v", err, first)
		}
	})
	t.Run("Done after a cancel past the deadline", func(t *testing.T) {
		c := New(context.Background(), time.Now().Add(-time.Millisecond))
		c.Cancel()
		first := c.Err()
		within(t, c.Done(), "canceled")
		if err := c.Err(); err != first {
			t.Fatalf("Err %v once Done was asked for, was %v", err, first)
		}
	})
}
