package security

import "time"

// FailLimiter rate-limits failed join attempts per source (an IP address):
// each source may fail Burst times, then once per Every. Successful
// attempts cost nothing. It is not safe for concurrent use: its caller
// holds a lock.
type FailLimiter struct {
	Burst int           // failures allowed at once; default 5
	Every time.Duration // one more failure allowed per Every; default 2s
	// MaxSources bounds the sources tracked; the oldest-refilled are
	// forgotten beyond it. Default 65,536.
	MaxSources int
	sources    map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func (l *FailLimiter) defaults() {
	if l.Burst <= 0 {
		l.Burst = 5
	}
	if l.Every <= 0 {
		l.Every = 2 * time.Second
	}
	if l.MaxSources <= 0 {
		l.MaxSources = 1 << 16
	}
	if l.sources == nil {
		l.sources = map[string]*bucket{}
	}
}

// refill returns src's bucket brought to now.
func (l *FailLimiter) refill(src string, now time.Time) *bucket {
	l.defaults()
	b := l.sources[src]
	if b == nil {
		return &bucket{tokens: float64(l.Burst), at: now}
	}
	if now.After(b.at) {
		b.tokens = min(float64(l.Burst), b.tokens+float64(now.Sub(b.at))/float64(l.Every))
		b.at = now
	}
	return b
}

// Wait returns how long src must wait before its next attempt (0: it may
// try now).
func (l *FailLimiter) Wait(src string, now time.Time) time.Duration {
	b := l.refill(src, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(l.Every))
}

// Fail records a failed attempt of src.
func (l *FailLimiter) Fail(src string, now time.Time) {
	b := l.refill(src, now)
	b.tokens = max(b.tokens-1, 0)
	if _, ok := l.sources[src]; !ok {
		if len(l.sources) >= l.MaxSources {
			l.forgetFull(now)
		}
		l.sources[src] = b
	}
}

// forgetFull drops the sources whose budget is full again, or, if none,
// every source (an attacker with that many addresses is not slowed by a
// per-address limit anyway).
func (l *FailLimiter) forgetFull(now time.Time) {
	for src := range l.sources {
		if l.refill(src, now).tokens >= float64(l.Burst) {
			delete(l.sources, src)
		}
	}
	if len(l.sources) >= l.MaxSources {
		clear(l.sources)
	}
}
