package duty

import (
	"context"
	"sync"
	"time"
)

// Deliveries shares Deliver runs between concurrent callers. A caller
// returns after one run that began after it called — so the run covered
// every outbox entry this replica had applied by then — and callers that
// arrive while a run is under way share the next one. A thousand nodes
// joining at once thus cost two runs in flight, not a thousand runs each
// resending the whole backlog to every group.
//
// A run is made on a goroutine of its own, bounded by RunTimeout, not by
// any caller's context: a caller whose context ends stops waiting, the
// run goes on for the others. (Runs cut short by an impatient caller left
// their commands queued, and the next run queued the same entries again
// behind them: at a thousand joining nodes deliveries fell further behind
// with every run.) What a run does not deliver, the outbox duty re-drives.
type Deliveries struct {
	c Cluster
	// RunTimeout bounds one run. Default 1 minute.
	RunTimeout time.Duration
	mu         sync.Mutex
	// next is the run callers arriving now wait for; nil when none waits.
	next *deliveryRun
	// running is set while a run is made.
	running bool
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
func NewDeliveries(c Cluster) *Deliveries { return &Deliveries{c: c, RunTimeout: time.Minute} }

// Deliver returns once a run of Deliver that began after the call ended,
// with its error, or when ctx ends.
func (d *Deliveries) Deliver(ctx context.Context) error {
	d.mu.Lock()
	r := d.next
	if r == nil {
		r = &deliveryRun{done: make(chan struct{})}
		d.next = r
	}
	d.setWaitingLocked(d.waiting + 1)
	d.startLocked()
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.setWaitingLocked(d.waiting - 1)
		d.mu.Unlock()
	}()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startLocked starts the run callers wait for, unless one is under way
// (then it starts when that one ends).
func (d *Deliveries) startLocked() {
	if d.running || d.next == nil {
		return
	}
	r := d.next
	d.next, d.running = nil, true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d.RunTimeout)
		err := Deliver(ctx, d.c)
		cancel()
		d.mu.Lock()
		defer d.mu.Unlock()
		r.err = err
		close(r.done)
		d.running = false
		d.startLocked()
	}()
}

func (d *Deliveries) setWaitingLocked(n int) {
	d.waiting = n
	if d.waitChanged != nil {
		d.waitChanged(n)
	}
}
