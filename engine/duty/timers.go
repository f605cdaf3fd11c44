package duty

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/clock"
	"shoal/statemachine"
)

// The timer duty is the leader-only clock of the service groups. The state
// machine fires its timers (delayed restarts, disconnect windows, rolling
// update steps) only when an entry stamped at or past the due time is
// applied; in a quiet group no entry may come. Every Interval the duty reads
// each service group's NextDue from this replica's state and, where
// 0 < NextDue <= now, proposes a CmdTick to that group (SubmitToGroup), whose
// entry carries the leader's time. A timer thus fires at most about one
// Interval late. Reads are stale (ReadLocal): a NextDue this replica has not
// applied yet is seen on a later run.

// TimerConfig tunes the timer duty. Zero values take the defaults named on
// each field.
type TimerConfig struct {
	// Interval is the time between runs, on Clock: the most a timer fires
	// late. Default 1s.
	Interval time.Duration
	// Clock times Interval and decides what is due; it should read the same
	// time as the engine's clock, which stamps the ticks. Default:
	// clock.Real (manager.Start passes the engine's clock).
	Clock clock.Clock
	// Logf receives read and proposal failures. Default: discard.
	Logf func(format string, args ...any)
}

func (c TimerConfig) withDefaults() TimerConfig {
	setDefault(&c.Interval, time.Second)
	defaults(&c.Clock, &c.Logf)
	return c
}

// TimerDuty is the timer duty; its methods are safe for concurrent use.
type TimerDuty struct {
	c     Cluster
	cfg   TimerConfig
	ticks atomic.Uint64
}

// NewTimerDuty returns the timer duty over c.
func NewTimerDuty(c Cluster, cfg TimerConfig) *TimerDuty {
	return &TimerDuty{c: c, cfg: cfg.withDefaults()}
}

// Ticks returns how many CmdTicks the duty has had applied so far.
func (d *TimerDuty) Ticks() uint64 { return d.ticks.Load() }

// Run ticks the due groups every Interval until ctx ends.
func (d *TimerDuty) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.cfg.Clock.After(d.cfg.Interval):
		}
		if err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logf("engine: timers: %v", err)
		}
	}
}

// timerDue reports whether a group whose earliest timer is next (0: none)
// needs a tick at now (both unix nanoseconds).
func timerDue(next, now int64) bool { return next > 0 && next <= now }

// dueGroups returns the service groups with a timer due at now, as this
// replica has applied them. A group it cannot read is skipped and reported.
func (d *TimerDuty) dueGroups(now int64) ([]int, error) {
	var due []int
	var first error
	for g := 1; g <= d.c.Groups(); g++ {
		var next int64
		if err := d.c.ReadLocal(g, func(s *statemachine.State) { next = s.NextDue() }); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if timerDue(next, now) {
			due = append(due, g)
		}
	}
	return due, first
}

// RunOnce proposes a tick to every group due at the clock's time,
// concurrently, and waits for them; it returns the first failure.
func (d *TimerDuty) RunOnce(ctx context.Context) error {
	due, first := d.dueGroups(d.cfg.Clock.Now().UnixNano())
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, g := range due {
		wg.Go(func() {
			_, err := d.c.SubmitToGroup(ctx, g, statemachine.Command{Kind: statemachine.CmdTick})
			if err == nil {
				d.ticks.Add(1)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = fmt.Errorf("tick group %d: %w", g, err)
			}
		})
	}
	wg.Wait()
	return first
}
