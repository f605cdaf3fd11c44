package agent

import (
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestReconnectDelay: the first reconnect after a lost session comes within
// one heartbeat period, later ones never sooner than one period nor later
// than the cap, and none sooner than the manager's Retry-After (nor later
// than one period after it, when that is what holds it back).
func TestReconnectDelay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Minute)).Draw(t, "period"))
		limit := time.Duration(rapid.Int64Range(int64(p), int64(10*time.Minute)).Draw(t, "limit"))
		attempt := rapid.IntRange(0, 100).Draw(t, "attempt")
		ra := time.Duration(0)
		if rapid.Bool().Draw(t, "retryAfter") {
			ra = time.Duration(rapid.Int64Range(1, int64(5*time.Minute)).Draw(t, "ra"))
		}
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		d := reconnectDelay(attempt, p, limit, ra, r)
		lo, hi := p, limit
		if attempt == 0 {
			lo, hi = 0, p
		}
		if ra > 0 {
			lo, hi = max(lo, ra), max(hi, ra+p)
		}
		if d < lo || d > hi {
			t.Fatalf("attempt %d, period %v, cap %v, Retry-After %v: delay %v outside [%v, %v]", attempt, p, limit, ra, d, lo, hi)
		}
	})
}

// TestReconnectSpread: a fleet that lost its sessions at once spreads its
// first reconnects over the whole period, not into its first tenth.
func TestReconnectSpread(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := 5 * time.Second
	var buckets [10]int
	for range 10000 {
		buckets[reconnectDelay(0, p, time.Minute, 0, r)*10/(p+1)]++
	}
	for i, n := range buckets {
		if n < 800 || n > 1200 {
			t.Fatalf("bucket %d of the first period holds %d of 10000 reconnects: %v", i, n, buckets)
		}
	}
}

func TestHeartbeatRetryDelay(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := 5 * time.Second
	for k := 1; k < 40; k++ {
		if d := heartbeatRetryDelay(k, p, 0, r); d <= 0 || d > p/2 {
			t.Fatalf("retry %d: %v, want within (0, %v]", k, d, p/2)
		}
	}
	if d := heartbeatRetryDelay(1, p, 3*time.Second, r); d < 3*time.Second {
		t.Fatalf("Retry-After not honoured: %v", d)
	}
	for range 1000 {
		if d := jitter(p, 0.1, r); d < 4500*time.Millisecond || d > 5500*time.Millisecond {
			t.Fatalf("±10%% jitter of 5s gave %v", d)
		}
	}
}
