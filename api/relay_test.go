package api

import (
	"context"
	"testing"
	"time"
)

// The leader spends most of the wait a follower sends on a relayed batch
// (less a fifth, at least 100ms, at most half, for the way back), and
// LeaderBeatWait's own bound when none or a bad one came.
func TestRelayBudget(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		header string
		want   time.Duration // 0: no deadline from the header
	}{
		{"2500", 2 * time.Second},
		{"750", 600 * time.Millisecond},
		{"120", 60 * time.Millisecond},
		{"", 0}, {"soon", 0}, {"-5", 0}, {"0", 0},
	} {
		ctx, cancel := relayBudget(context.Background(), []byte(c.header), now)
		dl, ok := ctx.Deadline()
		cancel()
		switch {
		case c.want == 0 && ok:
			t.Errorf("header %q: deadline %s; want none (the leader's own bound applies)", c.header, dl.Sub(now))
		case c.want != 0 && (!ok || dl.Sub(now) != c.want):
			t.Errorf("header %q: deadline %s (set %v); want %s", c.header, dl.Sub(now), ok, c.want)
		}
	}
}
