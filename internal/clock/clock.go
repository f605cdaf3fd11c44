package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed; the timer's
	// C() is nil. No goroutine waits meanwhile, so it suits many timers.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer fires once on C() after its duration, like time.Timer.
type Timer interface {
	// C is the channel the timer fires on (buffered, one value).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset makes the timer fire after d from now; it reports whether it was
	// active. A value left on C() by an earlier firing is discarded.
	Reset(d time.Duration) bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTimer returns a time.Timer behind the Timer interface.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc returns time.AfterFunc(d, f) behind the Timer interface.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Reset relies on Go ≥ 1.23 timer semantics: Reset and Stop discard a
// pending value, so no drain is needed.
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Offset is the wall clock moved by D: Now returns time.Now().Add(D);
// durations (timers, After) are the wall clock's. For tests of how a
// cluster copes with a replica whose clock is off.
type Offset struct {
	Real
	D time.Duration
}

// Now returns time.Now().Add(o.D).
func (o Offset) Now() time.Time { return time.Now().Add(o.D) }
