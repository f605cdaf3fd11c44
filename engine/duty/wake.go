package duty

import (
	"context"
	"time"
)

// wakeLoop runs once at once, then again every interval on clk and
// whenever sig fires (if sig is set), but never sooner than minGap after
// the start of the previous run, until ctx ends.
func wakeLoop(ctx context.Context, clk Clock, interval, minGap time.Duration, sig *Signal, once func()) {
	var wake <-chan struct{}
	if sig != nil {
		wake = sig.c
	}
	for {
		start := clk.Now()
		once()
		select {
		case <-ctx.Done():
			return
		case <-clk.After(interval):
		case <-wake:
			if gap := minGap - clk.Now().Sub(start); gap > 0 {
				select {
				case <-ctx.Done():
					return
				case <-clk.After(gap):
				}
			}
		}
	}
}
