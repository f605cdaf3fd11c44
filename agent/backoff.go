package agent

import (
	"math/rand/v2"
	"time"
)

// Delays that keep ten thousand agents from arriving in step. All are pure
// functions of their inputs and a seeded source.

// reconnectDelay is how long to wait before session attempt number attempt
// (0: the first after a lost session) with heartbeat period p:
//
//   - attempt 0: uniform over [0, p), so a fleet that lost its sessions at
//     once comes back spread over one period;
//   - later: full-jitter exponential backoff with a floor of one period,
//     uniform over [p, min(limit, p·2^attempt)];
//   - never sooner than the manager's Retry-After advice (ra), plus up to one
//     period of spread, so the agents it turned away do not return together.
func reconnectDelay(attempt int, p, limit, ra time.Duration, r *rand.Rand) time.Duration {
	p = max(p, time.Millisecond)
	var d time.Duration
	if attempt == 0 {
		d = uniform(r, 0, p)
	} else {
		hi := limit
		if attempt < 32 && p<<attempt < limit && p<<attempt > 0 {
			hi = p << attempt
		}
		d = uniform(r, p, max(hi, p))
	}
	if ra > d {
		d = ra + uniform(r, 0, p)
	}
	return d
}

// heartbeatRetryDelay is how long to wait after the k-th (from 1) failed
// heartbeat in a row: quick at first, so a leader change costs less than one
// period, growing to at most half a period; never sooner than ra.
func heartbeatRetryDelay(k int, p, ra time.Duration, r *rand.Rand) time.Duration {
	hi := p / 2
	if base := p / 20; k < 20 && base<<k < hi {
		hi = base << k
	}
	return max(uniform(r, hi/2, hi), ra)
}

// heartbeatTimeout bounds a heartbeat call after `failures` failed ones in
// a row: one period (at least a second), doubled per failure up to eight
// times that, never more than limit. A fleet that lost its leader dials the
// new one all at once; with a fixed one-period bound the connections (and
// TLS handshakes) still queued there when it ran out were dropped and
// dialled again, which only lengthened the queue.
func heartbeatTimeout(failures int, p, limit time.Duration) time.Duration {
	return min(limit, max(p, time.Second)<<min(failures, 3))
}

// jitter returns d scaled by a uniform factor in [1-f, 1+f].
func jitter(d time.Duration, f float64, r *rand.Rand) time.Duration {
	return time.Duration(float64(d) * (1 - f + 2*f*r.Float64()))
}

// uniform returns a duration uniform over [lo, hi] (lo when hi ≤ lo).
func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
