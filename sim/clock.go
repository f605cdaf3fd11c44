package sim

import (
	"container/heap"
	"sync"
	"time"

	"shoal/internal/clock"
)

// Clock is the simulation's clock: time moves only when the loop runs it
// (RunUntil), and every timer fires on the loop's goroutine, in deadline
// order (ties in the order they were armed): an AfterFunc's function is
// called, a channel timer gets its value. Now is safe from any goroutine.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap // armed timers, earliest first
}

// timerHeap orders timers by deadline, then by the order they were armed.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].when.Before(h[j].when) || (h[i].when.Equal(h[j].when) && h[i].seq < h[j].seq)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

var _ clock.Clock = (*Clock)(nil)

type timer struct {
	c      *Clock
	when   time.Time
	seq    uint64
	fn     func()
	ch     chan time.Time
	active bool
	idx    int // in the heap, while active
}

// NewClock returns a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that gets the time once d has passed.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTimer returns a channel timer.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.arm(t, d)
	return t
}

// AfterFunc calls f on the loop's goroutine once d has passed.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, fn: f}
	c.arm(t, d)
	return t
}

func (c *Clock) arm(t *timer, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(t, d)
}

func (c *Clock) armLocked(t *timer, d time.Duration) {
	if t.active {
		c.removeLocked(t)
	}
	t.when = c.now.Add(max(d, 0))
	c.seq++
	t.seq = c.seq
	t.active = true
	heap.Push(&c.timers, t)
}

func (c *Clock) removeLocked(t *timer) bool {
	if !t.active {
		return false
	}
	t.active = false
	heap.Remove(&c.timers, t.idx)
	return true
}

// next pops the earliest timer due at or before end, setting the clock to
// its deadline; nil when none is due.
func (c *Clock) next(end time.Time) *timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 || c.timers[0].when.After(end) {
		return nil
	}
	first := c.timers[0]
	c.removeLocked(first)
	if first.when.After(c.now) {
		c.now = first.when
	}
	return first
}

// RunUntil fires, one by one and in order, every timer due by end (also
// those armed meanwhile), calling after (if not nil) after each, then sets
// the clock to end.
func (c *Clock) RunUntil(end time.Time, after func()) {
	for {
		t := c.next(end)
		if t == nil {
			break
		}
		if t.fn != nil {
			t.fn()
		} else {
			select {
			case t.ch <- t.when:
			default:
			}
		}
		if after != nil {
			after()
		}
	}
	c.mu.Lock()
	if end.After(c.now) {
		c.now = end
	}
	c.mu.Unlock()
}

// Pending returns how many timers are armed.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.removeLocked(t)
}

func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	t.c.armLocked(t, d)
	return was
}

// drawSource is the world's random source: each draw is a function of the
// seed, the simulated instant it is made at and how many draws came
// before it at that instant, not of every draw made before. A directive
// removed from a run (Shrink) then leaves the draws of the other instants
// as they were: a network delay, a dropped message or the replica chosen
// for a call at 3m12.5s stays what it was, where one global sequence
// shifted every later draw.
type drawSource struct {
	seed uint64
	clk  *Clock
	at   int64
	n    uint64
}

// Uint64 reads the clock without its lock: draws are made on the loop.
func (s *drawSource) Uint64() uint64 {
	if now := s.clk.now.UnixNano(); now != s.at {
		s.at, s.n = now, 0
	}
	s.n++
	return mix64(s.seed ^ mix64(uint64(s.at)^s.n*0x9e3779b97f4a7c15))
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
