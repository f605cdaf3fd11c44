package clock

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. The zero value is not usable;
// use NewFake.
type Fake struct {
	mu struct {
		sync.Mutex
		now     time.Time
		timers  []*fakeTimer  // active timers, unordered
		seq     uint64        // creation order breaks deadline ties
		changed chan struct{} // closed and replaced when timers change
	}
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	f := &Fake{}
	f.mu.now = start
	f.mu.changed = make(chan struct{})
	return f
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.now
}

// After returns a channel that receives the fake time once Advance has moved
// it d past now.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// NewTimer returns a timer that fires when Advance moves the clock d past now.
// A timer with d ≤ 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(t, d)
	return t
}

// AfterFunc calls f in its own goroutine when Advance moves the clock d past
// now (at once for d ≤ 0). Pending AfterFunc timers count as waiters.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(t, d)
	return t
}

// Advance moves the clock forward by d, firing every timer whose deadline is
// reached, in deadline order; each fires with its own deadline as the value.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.mu.now.Add(d)
	for {
		t := f.earliestLocked()
		if t == nil || t.when.After(end) {
			break
		}
		f.mu.now = t.when
		f.fireLocked(t)
	}
	f.mu.now = end
}

// Waiters returns the number of active (armed, not yet fired) timers.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mu.timers)
}

// Next returns the deadline of the earliest active timer, false if none.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.earliestLocked(); t != nil {
		return t.when, true
	}
	return time.Time{}, false
}

// AdvanceToNext moves the clock to the earliest active timer's deadline and
// fires it (and any other timer due then). It reports false, without moving
// the clock, when no timer is active.
func (f *Fake) AdvanceToNext() bool {
	f.mu.Lock()
	t := f.earliestLocked()
	if t == nil {
		f.mu.Unlock()
		return false
	}
	d := t.when.Sub(f.mu.now)
	f.mu.Unlock()
	f.Advance(d)
	return true
}

// BlockUntil waits until at least n timers are active, for at most timeout of
// real time; it returns an error saying how many there were if the deadline
// passes. Tests call it to know the code under test has reached its wait.
func (f *Fake) BlockUntil(n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		have, changed := len(f.mu.timers), f.mu.changed
		f.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("clock: %d timers active after %v, want %d", have, timeout, n)
		}
	}
}

func (f *Fake) earliestLocked() *fakeTimer {
	var first *fakeTimer
	for _, t := range f.mu.timers {
		if first == nil || t.when.Before(first.when) || (t.when.Equal(first.when) && t.seq < first.seq) {
			first = t
		}
	}
	return first
}

// armLocked (re)arms t to fire d after now; d ≤ 0 fires it at once.
func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	t.when = f.mu.now.Add(d)
	f.mu.seq++
	t.seq = f.mu.seq
	if d <= 0 {
		t.fire(f.mu.now)
		return
	}
	t.active = true
	f.mu.timers = append(f.mu.timers, t)
	f.notifyLocked()
}

func (f *Fake) fireLocked(t *fakeTimer) {
	f.removeLocked(t)
	t.fire(t.when)
}

// removeLocked deactivates t; it reports whether t was active.
func (f *Fake) removeLocked(t *fakeTimer) bool {
	if !t.active {
		return false
	}
	t.active = false
	for i, x := range f.mu.timers {
		if x == t {
			f.mu.timers = append(f.mu.timers[:i], f.mu.timers[i+1:]...)
			break
		}
	}
	f.notifyLocked()
	return true
}

func (f *Fake) notifyLocked() {
	close(f.mu.changed)
	f.mu.changed = make(chan struct{})
}

// Pending returns how far in the future each active timer fires, soonest
// first; tests print it when a wait fails.
func (f *Fake) Pending() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ds []time.Duration
	for _, t := range f.mu.timers {
		ds = append(ds, t.when.Sub(f.mu.now))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

type fakeTimer struct {
	f      *Fake
	c      chan time.Time // nil for AfterFunc timers
	fn     func()
	when   time.Time
	seq    uint64
	active bool // guarded by f.mu
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// fire delivers now on c unless a value is already waiting, or starts fn.
func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- now:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.removeLocked(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.removeLocked(t)
	select { // discard a stale firing, as time.Timer does since Go 1.23
	case <-t.c:
	default:
	}
	t.f.armLocked(t, d)
	return was
}
