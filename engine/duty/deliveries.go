package duty

import (
	"context"
	"sync"
)

// Deliveries shares Deliver runs between concurrent callers. A caller
// returns after one run that began after it called — so the run covered
// every outbox entry this replica had applied by then — and callers that
// arrive while a run is under way share the next one. A thousand nodes
// joining at once thus cost two runs in flight, not a thousand runs each
// resending the whole backlog to every group.
//
// The run is made on the goroutine of one of its callers, with that
// caller's context; if it ends early, the others see its error (what was
// not delivered, the outbox duty re-drives).
type Deliveries struct {
	c  Cluster
	mu sync.Mutex
	// next is the run callers arriving now wait for; nil when none waits.
	next *deliveryRun
	// running is set while a run is made; ended closes when it is done.
	running bool
	ended   chan struct{}
	waiting int // callers waiting for a run
	// waitChanged, if set, is told the number of waiting callers each
	// time it changes (tests observe the queue through it).
	waitChanged func(waiting int)
}

type deliveryRun struct {
	done chan struct{}
	err  error
}

// NewDeliveries returns the shared deliverer of c's outbox.
func NewDeliveries(c Cluster) *Deliveries { return &Deliveries{c: c} }

// Deliver returns once a run of Deliver that began after the call ended,
// with its error, or when ctx ends.
func (d *Deliveries) Deliver(ctx context.Context) error {
	d.mu.Lock()
	r := d.next
	if r == nil {
		r = &deliveryRun{done: make(chan struct{})}
		d.next = r
	}
	for {
		select {
		case <-r.done:
			d.mu.Unlock()
			return r.err
		default:
		}
		if !d.running && d.next == r {
			d.next, d.running, d.ended = nil, true, make(chan struct{})
			d.mu.Unlock()
			err := Deliver(ctx, d.c)
			d.mu.Lock()
			r.err = err
			close(r.done)
			d.running = false
			close(d.ended)
			d.mu.Unlock()
			return err
		}
		ended := d.ended
		d.setWaitingLocked(d.waiting + 1)
		d.mu.Unlock()
		select {
		case <-r.done:
		case <-ended: // the run before ours is over: ours may start
		case <-ctx.Done():
			d.mu.Lock()
			d.setWaitingLocked(d.waiting - 1)
			d.mu.Unlock()
			return ctx.Err()
		}
		d.mu.Lock()
		d.setWaitingLocked(d.waiting - 1)
	}
}

func (d *Deliveries) setWaitingLocked(n int) {
	d.waiting = n
	if d.waitChanged != nil {
		d.waitChanged(n)
	}
}
