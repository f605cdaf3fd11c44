package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4/raftio"

	"shoal/route"
)

// Duty is leader-only work (node monitor, scheduler driver, timers). Run
// starts when this replica becomes leader of the cluster group; its context
// is cancelled when leadership is lost or the engine closes, and Run should
// then return promptly. A later term calls Run again.
type Duty interface {
	Run(ctx context.Context)
}

// DutyFunc adapts a function to Duty.
type DutyFunc func(ctx context.Context)

// Run calls f(ctx).
func (f DutyFunc) Run(ctx context.Context) { f(ctx) }

// leadership follows dragonboat's leader notifications: it records every
// group's leader as this replica sees it and runs the duties while this
// replica leads the cluster group.
type leadership struct {
	self    uint64
	leaders []atomic.Uint64 // per group: leader replica ID, 0 if unknown
	terms   []atomic.Uint64 // per group: term of the last notification
	// changes counts, per group, the leaders this replica learned of: a
	// known leader in a new term, or another leader (elections and
	// hand-overs alike; the first leader after start counts once).
	changes []atomic.Uint64
	// notify holds, per group, a channel closed (and replaced) at every
	// leader notification: entries in flight wait on it.
	notify struct {
		sync.Mutex
		ch []chan struct{}
	}
	changed chan struct{} // cap 1: the cluster group's leader changed
	// now is the engine's clock; cluster is the cluster group's leader as
	// last notified, and when this replica first heard of it in its term.
	now     func() time.Time
	cluster struct {
		sync.Mutex
		leader uint64
		since  time.Time
	}
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		duties []Duty
		ctx    context.Context // non-nil while duties run
		cancel context.CancelFunc
		wg     sync.WaitGroup
	}
}

var _ raftio.IRaftEventListener = (*leadership)(nil)

func newLeadership(self uint64, groups int, now func() time.Time) *leadership {
	l := &leadership{
		now:     now,
		self:    self,
		leaders: make([]atomic.Uint64, groups+1),
		terms:   make([]atomic.Uint64, groups+1),
		changes: make([]atomic.Uint64, groups+1),
		changed: make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	l.notify.ch = make([]chan struct{}, groups+1)
	for g := range l.notify.ch {
		l.notify.ch[g] = make(chan struct{})
	}
	go l.run()
	return l
}

// LeaderUpdated is dragonboat's notification; it must not block.
func (l *leadership) LeaderUpdated(info raftio.LeaderInfo) {
	g := groupOf(info.ShardID)
	if g < 0 || g >= len(l.leaders) {
		return
	}
	prevLeader := l.leaders[g].Swap(info.LeaderID)
	prevTerm := l.terms[g].Swap(info.Term)
	if info.LeaderID != 0 && (info.LeaderID != prevLeader || info.Term != prevTerm) {
		l.changes[g].Add(1)
	}
	if g == route.ClusterGroup {
		l.cluster.Lock()
		switch {
		case info.LeaderID == 0:
			l.cluster.leader, l.cluster.since = 0, time.Time{}
		case info.LeaderID != l.cluster.leader || info.Term != prevTerm:
			l.cluster.leader, l.cluster.since = info.LeaderID, l.now()
		}
		l.cluster.Unlock()
	}
	l.notify.Lock()
	close(l.notify.ch[g])
	l.notify.ch[g] = make(chan struct{})
	l.notify.Unlock()
	if g == route.ClusterGroup {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
}

// notified returns a channel closed at the next leader notification of
// group g.
func (l *leadership) notified(g int) <-chan struct{} {
	l.notify.Lock()
	defer l.notify.Unlock()
	return l.notify.ch[g]
}

// leaderTerm returns group g's leader (0 if unknown) and term as last
// notified.
func (l *leadership) leaderTerm(g int) (leader, term uint64) {
	return l.leaders[g].Load(), l.terms[g].Load()
}

func (l *leadership) run() {
	defer close(l.done)
	for {
		select {
		case <-l.changed:
			if l.leaders[route.ClusterGroup].Load() == l.self {
				l.startDuties()
			} else {
				l.stopDuties()
			}
		case <-l.stop:
			l.stopDuties()
			return
		}
	}
}

func (l *leadership) startDuties() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.ctx != nil {
		return
	}
	l.mu.ctx, l.mu.cancel = context.WithCancel(context.Background())
	for _, d := range l.mu.duties {
		l.startLocked(d)
	}
}

func (l *leadership) startLocked(d Duty) {
	ctx := l.mu.ctx
	l.mu.wg.Add(1)
	go func() {
		defer l.mu.wg.Done()
		d.Run(ctx)
	}()
}

// stopDuties cancels the running duties and waits until they returned.
func (l *leadership) stopDuties() {
	l.mu.Lock()
	if l.mu.ctx == nil {
		l.mu.Unlock()
		return
	}
	l.mu.cancel()
	l.mu.ctx, l.mu.cancel = nil, nil
	l.mu.Unlock()
	l.mu.wg.Wait()
}

func (l *leadership) add(d Duty) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.duties = append(l.mu.duties, d)
	if l.mu.ctx != nil {
		l.startLocked(d)
	}
}

// clusterLeader returns the cluster group's leader as last notified (0:
// none known) and when this replica first heard of it in its term (the
// zero time with no leader).
func (l *leadership) clusterLeader() (leader uint64, since time.Time) {
	l.cluster.Lock()
	defer l.cluster.Unlock()
	return l.cluster.leader, l.cluster.since
}

// leading reports whether duties are running now.
func (l *leadership) leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.ctx != nil
}

func (l *leadership) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// LeaderNotice returns the leader of a group as this replica's last
// leader notification named it (0: none known), and a channel closed at
// the next notification (an election begun or won, a hand-over). Leader
// may lag it: dragonboat records the leader it answers with after it
// notifies. A nil channel for a group out of range.
func (e *Engine) LeaderNotice(group int) (leader uint64, next <-chan struct{}) {
	if group < 0 || group > e.cfg.Groups {
		return 0, nil
	}
	next = e.lead.notified(group)
	leader, _ = e.lead.leaderTerm(group)
	return leader, next
}
