package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// fakeManager is an in-memory Manager for runner tests. It records every
// call (with the fake time), answers from fields the test sets, and
// broadcasts on every call so tests wait for conditions without sleeping.
type fakeManager struct {
	clk *clock.Fake
	mu  sync.Mutex
	ch  chan struct{} // closed and replaced on every change

	node     sm.NodeID // the ID a new node gets
	session  uint64    // the current session; calls with another get unknown_session
	period   time.Duration
	syncIv   time.Duration
	managers []string

	log       []string // "open", "hb", "status n=2", "rereport n=0 held=2", "poll", "sync"
	openAt    []time.Time
	openErrs  []error         // answered (and consumed) before a session opens
	keys      []string        // the key of every session request
	hbErr     error           // answered to every heartbeat while set
	hbStatus  sm.NodeStatus   // the node status successful heartbeats answer
	hbErrs    []error         // answered (and consumed) before hbErr
	hbBudgets []time.Duration // each heartbeat's time left before its deadline
	hbAt      []time.Time     // when each successful heartbeat came (fake clock)
	pollErrs  []error         // answered (and consumed) to long-polls, also to one waiting
	pollErrAt []time.Time     // when each of them was answered (fake clock)
	down      bool            // every call fails with a transport error
	stale     bool            // a parked poll is answered even if its session ended (a real manager's race)
	results   func(r wire.StatusReport) wire.ReportResult
	latest    map[sm.TaskID]wire.StatusReport // accepted statuses
	batches   []*wire.StatusBatch
	batchAt   []time.Time // when each batch came (fake clock)
	polls     []*wire.AssignmentsRequest
	frames    []*wire.Assignments // answered to long-polls, in order
	syncs     []*wire.SyncRequest
	destroy   []sm.TaskID // answered to the next sync
	setMgrs   [][]string
	sessionNo int
}

func newFakeManager(clk *clock.Fake) *fakeManager {
	return &fakeManager{clk: clk, ch: make(chan struct{}), node: 7, period: 5 * time.Second, syncIv: time.Minute,
		managers: []string{"m1:7700", "m2:7700"}, latest: map[sm.TaskID]wire.StatusReport{}}
}

func (f *fakeManager) changedLocked(entry string) {
	if entry != "" {
		f.log = append(f.log, entry)
	}
	close(f.ch)
	f.ch = make(chan struct{})
}

func (f *fakeManager) do(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
	f.changedLocked("")
}

var errDown = errors.New("connection refused")

func (f *fakeManager) checkLocked(id uint64) error {
	if f.down {
		return errDown
	}
	if id != f.session {
		return &wire.Error{Code: wire.CodeUnknownSession, Message: "no such session"}
	}
	return nil
}

func (f *fakeManager) OpenSession(ctx context.Context, req *wire.SessionRequest) (*wire.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.openAt = append(f.openAt, f.clk.Now())
	f.keys = append(f.keys, req.Key)
	if f.down {
		f.changedLocked("open-down")
		return nil, errDown
	}
	if len(f.openErrs) > 0 {
		err := f.openErrs[0]
		f.openErrs = f.openErrs[1:]
		f.changedLocked("open-refused")
		return nil, err
	}
	node := req.NodeID
	if node == 0 {
		node = f.node
	}
	f.sessionNo++
	f.session = uint64(100 + f.sessionNo)
	f.changedLocked(fmt.Sprintf("open node=%d", req.NodeID))
	return &wire.Session{NodeID: node, SessionID: f.session, HeartbeatPeriod: int64(f.period),
		SyncInterval: int64(f.syncIv), Managers: f.managers, Groups: 1}, nil
}

func (f *fakeManager) Heartbeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked(hb.SessionID); err != nil {
		f.changedLocked("hb-refused")
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		f.hbBudgets = append(f.hbBudgets, time.Until(dl))
	}
	if len(f.hbErrs) > 0 {
		err := f.hbErrs[0]
		f.hbErrs = f.hbErrs[1:]
		f.changedLocked("hb-error")
		return nil, err
	}
	if f.hbErr != nil {
		f.changedLocked("hb-error")
		return nil, f.hbErr
	}
	f.hbAt = append(f.hbAt, f.clk.Now())
	f.changedLocked("hb")
	return &wire.HeartbeatAck{Period: int64(f.period), Status: f.hbStatus}, nil
}

func (f *fakeManager) Assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error) {
	f.mu.Lock()
	if err := f.checkLocked(req.SessionID); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	f.polls = append(f.polls, req)
	f.changedLocked("")
	for len(f.frames) == 0 {
		if len(f.pollErrs) > 0 {
			err := f.pollErrs[0]
			f.pollErrs = f.pollErrs[1:]
			f.pollErrAt = append(f.pollErrAt, f.clk.Now())
			f.changedLocked("poll-error")
			f.mu.Unlock()
			return nil, err
		}
		ch := f.ch
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
		f.mu.Lock()
		if err := f.checkLocked(req.SessionID); err != nil && !f.stale {
			f.mu.Unlock()
			return nil, err
		}
	}
	fr := f.frames[0]
	f.frames = f.frames[1:]
	f.changedLocked("")
	f.mu.Unlock()
	return fr, nil
}

func (f *fakeManager) ReportStatus(ctx context.Context, b *wire.StatusBatch) (*wire.StatusAck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked(b.SessionID); err != nil {
		f.changedLocked("status-refused")
		return nil, err
	}
	f.batches = append(f.batches, b)
	f.batchAt = append(f.batchAt, f.clk.Now())
	ack := &wire.StatusAck{}
	for _, r := range b.Reports {
		res := wire.ReportAccepted
		if f.results != nil {
			res = f.results(r)
		}
		if res == wire.ReportAccepted {
			f.latest[r.Task] = r
		}
		ack.Results = append(ack.Results, res)
	}
	entry := fmt.Sprintf("status %s", reportsString(b.Reports))
	if b.ReReport {
		entry = fmt.Sprintf("rereport %s held=%v", reportsString(b.Reports), b.Held)
	}
	f.changedLocked(entry)
	return ack, nil
}

func (f *fakeManager) Sync(ctx context.Context, req *wire.SyncRequest) (*wire.SyncAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked(req.SessionID); err != nil {
		return nil, err
	}
	f.syncs = append(f.syncs, req)
	ans := &wire.SyncAnswer{Destroy: f.destroy}
	f.destroy = nil
	f.changedLocked(fmt.Sprintf("sync held=%v", req.Held))
	return ans, nil
}

func (f *fakeManager) SetManagers(addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setMgrs = append(f.setMgrs, slices.Clone(addrs))
	f.changedLocked("")
}

// push queues an assignments frame for the long-poll.
func (f *fakeManager) push(fr *wire.Assignments) { f.do(func() { f.frames = append(f.frames, fr) }) }

// expire forgets the current session (a manager restart, an expired TTL).
func (f *fakeManager) expire() { f.do(func() { f.session = 0 }) }

func reportsString(rs []wire.StatusReport) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%d:%v", r.Task, r.State)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// logSince returns the call log from entry i on.
func (f *fakeManager) logSince(i int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log[min(i, len(f.log)):])
}

func (f *fakeManager) logLen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.log)
}

// until waits, with a real-time deadline, for cond (evaluated under the
// fake's lock). Between checks it lets the agent's goroutines run and, when
// the fake saw no call for a moment, moves the fake clock to its next timer.
func (f *fakeManager) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.ch
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; calls:\n%s", what, strings.Join(dedupe(f.logSince(0)), "\n"))
		}
		select {
		case <-ch:
		case <-time.After(2 * time.Millisecond): // quiet: let time pass on the fake clock
			f.clk.AdvanceToNext()
		}
	}
}

// dedupe collapses runs of equal log entries ("hb ×12").
func dedupe(log []string) []string {
	var out []string
	for i := 0; i < len(log); {
		j := i
		for j < len(log) && log[j] == log[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", log[i], j-i))
		} else {
			out = append(out, log[i])
		}
		i = j
	}
	return out
}
