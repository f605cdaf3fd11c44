package agent

import (
	"context"
	"sync"
	"time"
)

// callContext is the context of one manager call: its parent's with a
// deadline. The deadline's timer is only set up when something waits on
// Done. The HTTP client reads the deadline and stops the exchange there
// itself; a heartbeat, a status report or a sync asks nothing else of its
// context, and a context.WithTimeout per call (its timer, a place in the
// parent's children, both undone at its end) was about a twentieth of
// the simulated agents' CPU in a ramp. Everything a context promises
// still holds: Done is closed at the deadline, when the parent ends or at
// cancel, whichever comes first, and Err says which (context.Cause, until
// Done was asked for, tells the parent's cause only).
type callContext struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	real     context.Context // set up by the first Done
	stop     context.CancelFunc
	canceled bool
}

// withCallDeadline returns a context of parent that ends at deadline, and
// the function that ends it sooner (call it when the call is done).
func withCallDeadline(parent context.Context, deadline time.Time) (*callContext, context.CancelFunc) {
	c := &callContext{parent: parent, deadline: deadline}
	return c, c.cancel
}

func (c *callContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done sets up, at its first call, a context.WithDeadline whose Done it
// returns from then on.
func (c *callContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.stop = context.WithDeadline(c.parent, c.deadline)
		if c.canceled {
			c.stop()
		}
	}
	return c.real.Done()
}

func (c *callContext) Err() error {
	c.mu.Lock()
	real, canceled := c.real, c.canceled
	c.mu.Unlock()
	switch {
	case real != nil:
		return real.Err()
	case canceled:
		return context.Canceled
	case c.parent.Err() != nil:
		return c.parent.Err()
	case !time.Now().Before(c.deadline):
		return context.DeadlineExceeded
	}
	return nil
}

// Value is the parent's, or the set-up context's once there is one (the
// context package finds a parent it can cancel through Value: a context
// derived from this one is then canceled with it, without a goroutine).
func (c *callContext) Value(key any) any {
	c.mu.Lock()
	real := c.real
	c.mu.Unlock()
	if real != nil {
		return real.Value(key)
	}
	return c.parent.Value(key)
}

func (c *callContext) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canceled = true
	if c.stop != nil {
		c.stop()
	}
}

func (c *callContext) String() string { return "agent call context" }
