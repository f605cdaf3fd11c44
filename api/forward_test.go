package api

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// A forwarded heartbeat is held nine tenths of what its agent says it
// waits (so the agent hears "retry" before it gives up), at most a minute;
// forwardHold when the agent says nothing usable.
func TestForwardedHeartbeatsAreHeldAsLongAsTheirAgentWaits(t *testing.T) {
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", forwardHold},
		{"5000", 4500 * time.Millisecond},
		{"600000", forwardHoldMax},
		{"-3", forwardHold},
		{"soon", forwardHold},
	} {
		var ctx fasthttp.RequestCtx
		if c.header != "" {
			ctx.Request.Header.Set(waitHeader, c.header)
		}
		if got := holdFor(&ctx); got != c.want {
			t.Errorf("%s %q: held %v, want %v", waitHeader, c.header, got, c.want)
		}
	}
}
