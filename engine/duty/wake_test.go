package duty

import (
	"context"
	"slices"
	"testing"
	"time"
)

// After a run that took a while, a signal does not start the next run at
// once: the loop waits until the gap for that run's duration has passed
// since it started (here three times its 100 ms), and not longer.
func TestWakeLoopRestsAfterALongRun(t *testing.T) {
	clk := newFakeClock()
	sig := NewSignal()
	runs := make(chan time.Time, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wakeLoop(ctx, clk, time.Hour, func(ran time.Duration) time.Duration { return 3 * ran }, sig, func() {
			runs <- clk.Now()
			clk.Advance(100 * time.Millisecond) // the run takes 100 ms
		})
	}()
	defer func() { cancel(); <-done }()
	first := <-runs
	blockUntil(t, clk, 1) // waiting for its interval or a signal
	sig.Notify()
	blockUntil(t, clk, 2) // and now resting, as well
	if p := clk.Pending(); !slices.Equal(p, []time.Duration{200 * time.Millisecond, time.Hour}) {
		t.Fatalf("timers %v after the signal; want the rest to end 300ms after the run began (in 200ms) and the interval", p)
	}
	clk.Advance(200 * time.Millisecond)
	select {
	case at := <-runs:
		if d := at.Sub(first); d != 300*time.Millisecond {
			t.Fatalf("the next run started %v after the first, want 300ms", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no run after the rest ended")
	}
}

// The driver rests Rest times as long as its last run spent scanning and
// placing (not the time its assignments took to commit), and never less
// than MinGap.
func TestDriverGap(t *testing.T) {
	d := &Driver{cfg: DriverConfig{MinGap: 20 * time.Millisecond, Rest: 1}}
	for _, c := range []struct{ ran, work, want time.Duration }{
		{time.Millisecond, time.Millisecond, 20 * time.Millisecond},
		{100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond, 2100 * time.Millisecond}, // most of it waiting for commits
	} {
		if got := d.gapAfter(c.ran, c.work); got != c.want {
			t.Errorf("after a run of %v (%v of it working): gap %v, want %v", c.ran, c.work, got, c.want)
		}
	}
	d.cfg.Rest = -1
	if got := d.gapAfter(100*time.Millisecond, 100*time.Millisecond); got != 100*time.Millisecond {
		t.Errorf("with no rest, after a run of 100ms: gap %v, want 100ms (no wait)", got)
	}
}
