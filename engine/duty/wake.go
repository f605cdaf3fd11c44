package duty

import (
	"context"
	"time"

	"shoal/internal/clock"
)

// wakeLoop runs once at once, then again every interval on clk and
// whenever sig fires (if sig is set), but never sooner than gap(ran) after
// the start of the previous run, ran being how long that run took, until
// ctx ends.
func wakeLoop(ctx context.Context, clk clock.Clock, interval time.Duration, gap func(ran time.Duration) time.Duration, sig *Signal, once func()) {
	var wake <-chan struct{}
	if sig != nil {
		wake = sig.c
	}
	for {
		start := clk.Now()
		once()
		ran := clk.Now().Sub(start)
		select {
		case <-ctx.Done():
			return
		case <-clk.After(interval):
		case <-wake:
			if g := gap(ran) - clk.Now().Sub(start); g > 0 {
				select {
				case <-ctx.Done():
					return
				case <-clk.After(g):
				}
			}
		}
	}
}

// fixedGap is a gap of d whatever the run took.
func fixedGap(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}
