package callctx

import (
	"context"
	"sync"
	"time"
)

// Context is parent's context ending at a deadline.
type Context struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	real     context.Context // set up by the first Done
	stop     context.CancelFunc
	canceled bool
	err      error // what Err said first, said from then on
}

// WithDeadline returns a context of parent that ends at deadline, and the
// function that ends it sooner (call it when the call is done).
func WithDeadline(parent context.Context, deadline time.Time) (*Context, context.CancelFunc) {
	c := New(parent, deadline)
	return c, c.Cancel
}

// WithTimeout is WithDeadline(parent, time.Now().Add(d)).
func WithTimeout(parent context.Context, d time.Duration) (*Context, context.CancelFunc) {
	return WithDeadline(parent, time.Now().Add(d))
}

// New is WithDeadline's context alone, in one allocation: call its Cancel
// when the call is done.
func New(parent context.Context, deadline time.Time) *Context {
	return &Context{parent: parent, deadline: deadline}
}

// Deadline is the earlier of the parent's and the context's own.
func (c *Context) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done sets up, at its first call, a context.WithDeadline whose Done it
// returns from then on.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		if c.err == context.Canceled || c.err == nil && c.canceled {
			// Ended by its cancel: so says the set-up context too, even
			// past the deadline.
			c.real, c.stop = context.WithCancel(c.parent)
			c.stop()
		} else {
			c.real, c.stop = context.WithDeadline(c.parent, c.deadline)
			if c.canceled {
				c.stop()
			}
		}
	}
	return c.real.Done()
}

// Err is nil until the context ends, then why (the first answer stands:
// a cancel after the deadline passed does not change it).
func (c *Context) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	switch {
	case c.real != nil:
		c.err = c.real.Err()
	case c.canceled:
		c.err = context.Canceled
	case c.parent.Err() != nil:
		c.err = c.parent.Err()
	case !time.Now().Before(c.deadline):
		c.err = context.DeadlineExceeded
	}
	return c.err
}

// Value is the parent's, or the set-up context's once there is one (the
// context package finds a parent it can cancel through Value: a context
// derived from this one is then canceled with it, without a goroutine).
func (c *Context) Value(key any) any {
	c.mu.Lock()
	real := c.real
	c.mu.Unlock()
	if real != nil {
		return real.Value(key)
	}
	return c.parent.Value(key)
}

// Cancel ends the context (if it has not ended).
func (c *Context) Cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canceled = true
	if c.stop != nil {
		c.stop()
	}
}

func (c *Context) String() string { return "call context" }
