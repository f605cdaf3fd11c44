package loadgen

import (
	"context"
	"errors"
	"strconv"
	"time"

	"shoal/api/client"
)

// confirmSuspects settles the address conflicts the stream's view suspects
// (check.Suspect) against the replicated state, every second until ctx
// ends, and once more when it does. A suspect whose tasks cannot be read
// (the managers are too busy to answer in time) is tried again at the next
// round; only in the last round does an unread suspect count as a
// violation.
func (r *run) confirmSuspects(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			r.settleSuspects(context.Background(), true)
			return
		case <-time.After(time.Second):
		}
		r.settleSuspects(ctx, false)
	}
}

func (r *run) settleSuspects(ctx context.Context, last bool) {
	sus := r.checker.Suspects()
	if len(sus) == 0 {
		return
	}
	read := func(id uint64) (*client.Task, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return r.driver.Task(rctx, strconv.FormatUint(id, 10))
	}
	for _, s := range sus {
		a, errA := read(s.Tasks[0])
		b, errB := read(s.Tasks[1])
		again, errC := read(s.Tasks[0]) // see check.Checker.Confirm
		if errA != nil || errB != nil || errC != nil {
			if !last && ctx.Err() == nil {
				r.checker.Requeue(s) // the next round reads again
				continue
			}
			// Unconfirmed either way: keep the suspicion as a violation
			// rather than drop it.
			r.checker.ConfirmUnread(s, errors.Join(errA, errB, errC), time.Now())
			continue
		}
		r.checker.Confirm(s, a, b, again, time.Now())
	}
}
