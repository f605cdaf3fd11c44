package workload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"shoal/api/client"
)

// keptErrors is how many failed calls the driver describes (the first).
const keptErrors = 10

// outage is how long a call may have been refused as unavailable when its
// phase ends for the refusals to count as an error, not as a call the
// phase's end cut short: a leader kill makes calls wait a few seconds.
const outage = 10 * time.Second

// cutShort is a call whose phase ended while it was retrying: the
// cluster had answered it last, since `since`.
type cutShort struct {
	last  error
	since time.Time
}

func (c *cutShort) Error() string {
	return fmt.Sprintf("%v (refused for %.0fs when the phase ended)", c.last, time.Since(c.since).Seconds())
}

func (c *cutShort) Unwrap() error { return c.last }

// failed counts a call that failed after its retries, and describes the
// first few. A call its phase's end cut short is counted apart, unless
// the cluster had refused it for `outage` or longer by then.
func (d *Driver) failed(ctx context.Context, what string, err error) {
	var cs *cutShort
	long := errors.As(err, &cs) && time.Since(cs.since) >= outage
	if ctx.Err() != nil && !long {
		d.Counts.Interrupted.Add(1)
		return
	}
	d.Counts.Errors.Add(1)
	d.errs.Lock()
	if len(d.errs.first) < keptErrors {
		d.errs.first = append(d.errs.first, what+": "+err.Error())
	}
	d.errs.Unlock()
}

// Errors describes the first failed calls (at most keptErrors).
func (d *Driver) Errors() []string {
	d.errs.Lock()
	defer d.errs.Unlock()
	return append([]string(nil), d.errs.first...)
}

// call runs f against a manager, moving to the next one when a manager is
// unreachable or unavailable, until it succeeds, fails otherwise, or ctx
// ends.
func (d *Driver) call(ctx context.Context, f func(ctx context.Context, c *client.Client) error) error {
	backoff := 50 * time.Millisecond
	var failing time.Time // the first retried failure
	for {
		c := d.clients[int(d.cur.Load())%len(d.clients)]
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := f(cctx, c)
		cancel()
		var ae *client.APIError
		retry := errors.Is(err, client.ErrUnreachable) ||
			(errors.As(err, &ae) && (ae.Code == client.CodeUnavailable || ae.Status == http.StatusServiceUnavailable || ae.Code == client.CodeInternalFail))
		if err == nil || !retry {
			return err
		}
		if failing.IsZero() {
			failing = time.Now()
		}
		d.cur.Add(1)
		select {
		case <-ctx.Done():
			return &cutShort{last: err, since: failing}
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func isCode(err error, code string) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Code == code
}
