package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// harness runs one agent against a fakeManager on a fake clock, with a
// simulated executor and a MemStore.
type harness struct {
	t     *testing.T
	clk   *clock.Fake
	mgr   *fakeManager
	store *MemStore
	exec  *SimExecutor
	cfg   Config
	agent *Agent // the running agent (start)
	stop  context.CancelFunc
	done  chan error
}

func newHarness(t *testing.T, sim SimConfig) *harness {
	clk := clock.NewFake(t0)
	h := &harness{t: t, clk: clk, mgr: newFakeManager(clk), store: NewMemStore(), exec: NewSimExecutor(clk, sim)}
	h.cfg = Config{Manager: h.mgr, Store: h.store, Clock: clk, Seed: 1,
		Node:   wire.NodeDescription{Hostname: "n1"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(h.shutdown)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	cfg := h.cfg
	cfg.Executor = h.exec
	a, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.stop, h.done = a, cancel, make(chan error, 1)
	go func() { h.done <- a.Run(ctx) }()
}

// shutdown stops the agent and returns Run's result.
func (h *harness) shutdown() {
	if h.stop == nil {
		return
	}
	h.stop()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Error("Run did not return after cancel")
	}
	h.stop = nil
}

// restart kills the agent and starts another on the same store, with the
// executor of a restarted agent (simulated processes keep running).
func (h *harness) restart() {
	h.shutdown()
	h.exec = h.exec.Reopen()
	h.start()
}

func (h *harness) acceptedState(id sm.TaskID) sm.TaskState { return h.mgr.latest[id].State }

func TestRunnerJoinsAndRunsTasks(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.start()
	h.mgr.until(t, "re-report on the first session", func() bool { return len(h.mgr.batches) == 1 })
	expect(t, "first calls", strings.Join(h.mgr.logSince(0)[:3], ", "), "open node=0, hb, rereport [] held=[]")
	if st, _ := h.store.Load(); st.NodeID != 7 {
		t.Fatalf("node ID %d not saved", st.NodeID)
	}
	if len(h.mgr.setMgrs) != 1 || h.mgr.setMgrs[0][1] != "m2:7700" {
		t.Fatalf("manager list not passed on: %v", h.mgr.setMgrs)
	}
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning)))
	h.mgr.until(t, "both running", func() bool {
		return h.acceptedState(1) == sm.StateRunning && h.acceptedState(2) == sm.StateRunning
	})
	h.mgr.until(t, "a poll from the new cursor", func() bool {
		return len(h.mgr.polls) >= 2 && h.mgr.polls[len(h.mgr.polls)-1].Cursor.Get(0) == 3
	})
	if h.exec.Running() != 2 {
		t.Fatalf("%d simulated processes, want 2", h.exec.Running())
	}
	// Scale down: task 2 removed: stopped and forgotten, never reported.
	h.mgr.push(incFrame(3, 4, nil, 2))
	h.mgr.until(t, "sync no longer lists 2", func() bool {
		n := len(h.mgr.syncs)
		return n > 0 && slices.Equal(h.mgr.syncs[n-1].Held, []sm.TaskID{1}) && h.mgr.syncs[n-1].Seqs[0] == 4
	})
	if h.exec.Running() != 1 {
		t.Fatalf("%d simulated processes, want 1", h.exec.Running())
	}
}

func TestRunnerReconnectHeartbeatsFirstThenReports(t *testing.T) {
	// Tasks fail 10s after they start.
	h := newHarness(t, SimConfig{Run: SimStage{Delay: 10 * time.Second, Outcomes: []SimOutcome{{Weight: 1, ExitCode: 3}}}})
	h.cfg.MaxBatch = 1
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning)))
	h.mgr.until(t, "both running", func() bool {
		return h.acceptedState(1) == sm.StateRunning && h.acceptedState(2) == sm.StateRunning
	})
	// The agent is cut off and the manager loses the session; meanwhile
	// both tasks fail.
	h.mgr.do(func() { h.mgr.down, h.mgr.session = true, 0 })
	h.mgr.until(t, "both failed locally", func() bool {
		n := 0
		for _, r := range h.store.Tasks() {
			if r.Status.State == sm.StateFailed {
				n++
			}
		}
		return n == 2
	})
	mark := h.mgr.logLen()
	h.mgr.do(func() { h.mgr.down = false })
	h.mgr.until(t, "failures accepted on a new session", func() bool {
		return h.acceptedState(1) == sm.StateFailed && h.acceptedState(2) == sm.StateFailed && h.mgr.sessionNo == 2
	})
	h.mgr.until(t, "the re-report marker", func() bool {
		return strings.HasPrefix(h.mgr.log[len(h.mgr.log)-1], "rereport")
	})
	log := h.mgr.logSince(mark)
	i := slices.Index(log, "open node=7")
	if i < 0 || i+1 >= len(log) || log[i+1] != "hb" {
		t.Fatalf("the new session did not begin with a heartbeat: %v", log)
	}
	var reports []string
	for _, e := range log[i:] {
		if strings.HasPrefix(e, "status") || strings.HasPrefix(e, "rereport") {
			reports = append(reports, e)
		}
	}
	if len(reports) < 2 {
		t.Fatalf("reports after reconnecting: %v", reports)
	}
	expect(t, "reports after reconnecting", strings.Join(reports[:2], ", "),
		"status [1:failed], rereport [2:failed] held=[1 2]")
}

// A session that outlives a disconnect (the manager marked the node
// disconnected, then took its heartbeats back and answers them with the
// node initializing) re-reports on that same session, so the manager does
// not wait out its re-report window; a ready node is not re-reported to.
func TestRunnerReReportsWhenAHeartbeatFindsTheNodeInitializing(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning)))
	h.mgr.until(t, "running accepted", func() bool { return h.acceptedState(1) == sm.StateRunning })
	rereports := func() int {
		n := 0
		for _, e := range h.mgr.log {
			if strings.HasPrefix(e, "rereport") {
				n++
			}
		}
		return n
	}
	h.mgr.do(func() { h.mgr.hbStatus = sm.NodeInitializing })
	h.mgr.until(t, "a re-report on the same session", func() bool {
		return rereports() >= 2
	})
	h.mgr.do(func() { h.mgr.hbStatus = sm.NodeReady })
	if h.mgr.sessionNo != 1 {
		t.Fatalf("%d sessions, want the first one kept", h.mgr.sessionNo)
	}
	last := h.mgr.batches[len(h.mgr.batches)-1]
	if !last.ReReport || !slices.Equal(last.Held, []sm.TaskID{1}) {
		t.Fatalf("last batch %+v, want the marker holding task 1", last)
	}
	n := rereports()
	hbs := len(h.mgr.hbAt)
	h.mgr.until(t, "three more heartbeats", func() bool { return len(h.mgr.hbAt) >= hbs+3 })
	if got := rereports(); got != n {
		t.Fatalf("%d re-reports while the node is ready, want %d", got, n)
	}
}

func TestRunnerRetriedStatusIsResent(t *testing.T) {
	h := newHarness(t, SimConfig{})
	refusals := 3
	h.mgr.results = func(r wire.StatusReport) wire.ReportResult {
		if r.State == sm.StateRunning && refusals > 0 {
			refusals--
			return wire.ReportRetry
		}
		return wire.ReportAccepted
	}
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning)))
	h.mgr.until(t, "running accepted after refusals", func() bool { return h.acceptedState(1) == sm.StateRunning })
	// Each resend came at least a routine interval after the send before it.
	var at []time.Time
	for _, b := range h.mgr.batches {
		for _, r := range b.Reports {
			if r.State == sm.StateRunning {
				at = append(at, time.Unix(0, r.At))
			}
		}
	}
	if len(at) != 4 {
		t.Fatalf("running sent %d times, want 4", len(at))
	}
}

// TestRunnerUrgentStatusCutsARoutineWaitShort: while the status loop waits
// out the routine interval for a status the manager refused for now, a
// task's new state (urgent) goes after the urgent delay, not with the
// refused one a second later: the machine's work still wakes a loop whose
// wait a change can bring forward.
func TestRunnerUrgentStatusCutsARoutineWaitShort(t *testing.T) {
	h := newHarness(t, SimConfig{})
	refused := false
	h.mgr.results = func(r wire.StatusReport) wire.ReportResult {
		// A routine batch's, not the re-report's (whose refusal the
		// loop waits out with a sleep of its own).
		if b := h.mgr.batches[len(h.mgr.batches)-1]; !b.ReReport && r.Task == 1 && r.State == sm.StateRunning && !refused {
			refused = true
			return wire.ReportRetry
		}
		return wire.ReportAccepted
	}
	h.start()
	h.mgr.until(t, "the session's re-report", func() bool {
		return slices.ContainsFunc(h.mgr.batches, func(b *wire.StatusBatch) bool { return b.ReReport })
	})
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning)))
	var lastEnd time.Time
	h.mgr.until(t, "task 1's running refused for now", func() bool {
		if refused {
			lastEnd = h.mgr.batchAt[len(h.mgr.batchAt)-1]
		}
		return refused
	})
	// The loop now waits a routine interval from that batch.
	routine := lastEnd.Add(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(h.clk.Pending(), routine.Sub(h.clk.Now())) {
		if time.Now().After(deadline) {
			t.Fatalf("the status loop is not waiting a routine interval; timers in %v", h.clk.Pending())
		}
		runtime.Gosched()
	}
	h.mgr.push(incFrame(3, 4, []wire.Assignment{asg(2, sm.DesiredRunning)}))
	var sent time.Time
	h.mgr.until(t, "task 2 reported", func() bool {
		for i, b := range h.mgr.batches {
			for _, r := range b.Reports {
				if r.Task == 2 && sent.IsZero() {
					sent = h.mgr.batchAt[i]
				}
			}
		}
		return !sent.IsZero()
	})
	if !sent.Before(routine) {
		t.Fatalf("task 2's first status went %v after the refused batch, want the urgent delay (200ms), not the routine interval", sent.Sub(lastEnd))
	}
}

func TestRunnerNodeRemoved(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.mgr.hbErr = &wire.Error{Code: wire.CodeNodeRemoved, Message: "node removed"}
	h.start()
	select {
	case err := <-h.done:
		if !errors.Is(err, ErrNodeRemoved) {
			t.Fatalf("Run = %v, want ErrNodeRemoved", err)
		}
		h.stop = nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run went on after node_removed")
	}
}

func TestRunnerHonoursRetryAfter(t *testing.T) {
	h := newHarness(t, SimConfig{})
	busy := &wire.Error{Code: wire.CodeBusy, Message: "too many session setups", RetryAfter: int64(30 * time.Second)}
	h.mgr.openErrs = []error{busy, errors.New("connection refused")}
	h.start()
	h.mgr.until(t, "a session", func() bool { return h.mgr.sessionNo == 1 })
	at := h.mgr.openAt
	if d := at[1].Sub(at[0]); d < 30*time.Second {
		t.Fatalf("retried %v after a busy answer with Retry-After 30s", d)
	}
	if d := at[2].Sub(at[1]); d < h.cfg.InitialPeriod && d < 5*time.Second {
		t.Fatalf("second retry after %v: under the one-period floor", d)
	}
}

func TestRunnerRestartKeepsNodeAndProcesses(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning)))
	h.mgr.until(t, "both running", func() bool {
		return h.acceptedState(1) == sm.StateRunning && h.acceptedState(2) == sm.StateRunning
	})
	h.restart()
	h.mgr.until(t, "a second session as node 7", func() bool { return h.mgr.sessionNo == 2 })
	h.mgr.until(t, "a re-report", func() bool {
		b := h.mgr.batches[len(h.mgr.batches)-1]
		return b.ReReport && b.SessionID == h.mgr.session
	})
	if !slices.Contains(h.mgr.logSince(0), "open node=7") {
		t.Fatal("the restarted agent did not reopen as node 7")
	}
	if h.exec.Running() != 2 {
		t.Fatalf("%d simulated processes after the restart, want 2 (no duplicates, none lost)", h.exec.Running())
	}
	// The first poll after the restart does not wait, and resumes from the cursor.
	h.mgr.until(t, "a poll of the new session", func() bool {
		return h.mgr.polls[len(h.mgr.polls)-1].SessionID == h.mgr.session
	})
	for _, p := range h.mgr.polls {
		if p.SessionID == h.mgr.session {
			if p.Wait != 0 || p.Cursor.Get(0) != 3 {
				t.Fatalf("first poll after restart: %+v", p)
			}
			break
		}
	}
}

func TestRunnerSyncDestroys(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning)))
	h.mgr.until(t, "both running", func() bool {
		return h.acceptedState(1) == sm.StateRunning && h.acceptedState(2) == sm.StateRunning
	})
	h.mgr.do(func() { h.mgr.destroy = []sm.TaskID{2} })
	h.mgr.until(t, "a sync without 2", func() bool {
		n := len(h.mgr.syncs)
		return n >= 2 && slices.Equal(h.mgr.syncs[n-1].Held, []sm.TaskID{1})
	})
	if h.exec.Running() != 1 {
		t.Fatalf("%d simulated processes, want 1", h.exec.Running())
	}
}

// SyncNow brings the next sync forward: it comes while the fake clock
// stands still, far from the next turn (30 to 90 s away).
func TestRunnerSyncNow(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.start()
	h.mgr.until(t, "a first sync", func() bool { return len(h.mgr.syncs) >= 1 })
	h.agent.SyncNow()
	deadline := time.Now().Add(10 * time.Second)
	for { // the fake clock stands still
		h.mgr.mu.Lock()
		n, ch := len(h.mgr.syncs), h.mgr.ch
		h.mgr.mu.Unlock()
		if n >= 2 {
			break
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no sync after SyncNow within 10 s while the clock stood still (%d syncs)", n)
		}
	}
}

func TestRunnerMarkerResentAfterRetry(t *testing.T) {
	h := newHarness(t, SimConfig{})
	// A restarted agent owes "running" for task 1, whose process runs on.
	h.exec.startProc(1)
	handle := nextEvent(t, h.exec).Obs.Handle
	rec := TaskRecord{Assignment: asg(1, sm.DesiredRunning), Handle: handle,
		Status: wire.StatusReport{Task: 1, State: sm.StateRunning}, Acked: wire.StatusReport{Task: 1, State: sm.StateAssigned}}
	_ = h.store.SaveNodeID(7)
	_ = h.store.Apply(&Writes{Tasks: []TaskRecord{rec}, Meta: &Meta{Cursor: wire.Cursor{0, 3}}})
	refused := false
	h.mgr.results = func(r wire.StatusReport) wire.ReportResult {
		if !refused {
			refused = true
			return wire.ReportRetry // in the marker's batch: the manager ignores the marker
		}
		return wire.ReportAccepted
	}
	h.start()
	h.mgr.until(t, "a second marker", func() bool {
		n := 0
		for _, b := range h.mgr.batches {
			if b.ReReport {
				n++
			}
		}
		return n >= 2 && h.acceptedState(1) == sm.StateRunning
	})
	if b := h.mgr.batches[0]; !b.ReReport || len(b.Reports) != 1 {
		t.Fatalf("first batch %+v, want the marker with the owed status", b)
	}
}

func TestRunnerStopOnExit(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.cfg.StopOnExit = true
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning)))
	h.mgr.until(t, "both running", func() bool {
		return h.acceptedState(1) == sm.StateRunning && h.acceptedState(2) == sm.StateRunning
	})
	h.shutdown()
	if n := h.exec.Running(); n != 0 {
		t.Fatalf("%d simulated processes left after Run returned", n)
	}
	for _, r := range h.store.Tasks() {
		if r.Status.State != sm.StateShutdown {
			t.Fatalf("task %d stored as %v, want shutdown", r.Assignment.Task, r.Status.State)
		}
	}
}

// Heartbeats that keep failing get more time each (one period, doubled per
// failure in a row, at most eight periods); the first success brings the
// bound back to one period.
func TestRunnerHeartbeatTimeoutGrowsWhileFailing(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.mgr.period = time.Second
	timeout := errors.New("timeout")
	h.mgr.hbErrs = []error{timeout, timeout, timeout, timeout, timeout}
	h.start()
	h.mgr.until(t, "two heartbeats after the failures", func() bool { return len(h.mgr.hbBudgets) >= 7 })
	h.mgr.do(func() {})
	want := []time.Duration{1, 2, 4, 8, 8, 8, 1}
	for i, w := range want {
		got := h.mgr.hbBudgets[i]
		if w *= time.Second; got > w || got < w-500*time.Millisecond {
			t.Errorf("heartbeat %d had %v before its deadline, want about %v (all: %v)", i, got, w, h.mgr.hbBudgets[:len(want)])
		}
	}
}

// A long-poll that loses its connection (the manager died) makes the next
// heartbeat go within a tenth of a period instead of at the next period,
// so the agent finds the new leader as soon as there is one. A refusal
// with an answer (a wire error) does not.
func TestRunnerBeatsWhenAnotherCallLosesItsConnection(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.mgr.period = 5 * time.Second
	h.start()
	h.mgr.until(t, "a heartbeat and a waiting poll", func() bool { return len(h.mgr.hbAt) >= 1 && len(h.mgr.polls) >= 1 })
	h.mgr.do(func() { h.mgr.pollErrs = []error{&wire.Error{Code: wire.CodeUnavailable, Message: "busy"}} })
	h.mgr.until(t, "the refused poll and the next beat", func() bool { return len(h.mgr.pollErrAt) == 1 && len(h.mgr.hbAt) >= 2 })
	h.mgr.do(func() {
		if d := h.mgr.hbAt[1].Sub(h.mgr.hbAt[0]); d < 4*time.Second {
			t.Errorf("a refused poll brought the heartbeat forward: %v after the last, period 5s", d)
		}
	})
	h.mgr.until(t, "a poll waiting again", func() bool { return len(h.mgr.polls) >= 2 })
	h.mgr.do(func() { h.mgr.pollErrs = []error{errDown} })
	beats := 0
	h.mgr.until(t, "the lost poll and the next beat", func() bool {
		beats = len(h.mgr.hbAt)
		return len(h.mgr.pollErrAt) == 2 && beats >= 3 && h.mgr.hbAt[beats-1].After(h.mgr.pollErrAt[1])
	})
	h.mgr.do(func() {
		if d := h.mgr.hbAt[beats-1].Sub(h.mgr.pollErrAt[1]); d > 500*time.Millisecond {
			t.Errorf("the heartbeat came %v after the poll lost its connection, want within a tenth of the 5s period", d)
		}
	})
}

// gatedExec is an executor whose Do waits, while gated, until the gate
// opens: an agent's executor busy with a slow operation.
type gatedExec struct {
	Executor
	gated   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedExec) Do(a Action) {
	if g.gated.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.gate
	}
	g.Executor.Do(a)
}

// While the agent's executor is stuck in an operation (holding the
// machine), its heartbeats go on at their period.
func TestRunnerBeatsWhileItsExecutorIsBusy(t *testing.T) {
	h := newHarness(t, SimConfig{})
	ex := &gatedExec{Executor: h.exec, entered: make(chan struct{}), gate: make(chan struct{})}
	ex.gated.Store(true)
	cfg := h.cfg
	cfg.Executor = ex
	a, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.stop, h.done = a, cancel, make(chan error, 1)
	go func() { h.done <- a.Run(ctx) }()
	defer close(ex.gate)
	h.mgr.until(t, "a heartbeat and a waiting poll", func() bool { return len(h.mgr.hbAt) >= 1 && len(h.mgr.polls) >= 1 })
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning)))
	select {
	case <-ex.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor was never asked to start the task")
	}
	var before int
	h.mgr.do(func() { before = len(h.mgr.hbAt) })
	h.mgr.until(t, "three more heartbeats while the executor is stuck", func() bool { return len(h.mgr.hbAt) >= before+3 })
}

// A new agent names itself with a key it saved before its first session,
// and asks with that same key until it has a node ID, across a restart:
// a first session whose answer was lost gives one node, not two. Once it
// has an ID it sends no key.
func TestRunnerKeepsItsJoinKeyUntilItHasANode(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.mgr.openErrs = []error{errors.New("the answer was lost")}
	h.start()
	h.mgr.until(t, "a session after the lost answer", func() bool { return len(h.mgr.keys) >= 2 })
	st, _ := h.store.Load()
	if h.mgr.keys[0] == "" || h.mgr.keys[1] != h.mgr.keys[0] || st.JoinKey != h.mgr.keys[0] {
		t.Fatalf("keys sent %q, saved %q: want one saved key, sent each time", h.mgr.keys, st.JoinKey)
	}
	h.mgr.until(t, "the node ID saved", func() bool { st, _ := h.store.Load(); return st.NodeID != 0 })
	h.restart()
	h.mgr.until(t, "a session after the restart", func() bool { return len(h.mgr.keys) >= 3 })
	if k := h.mgr.keys[len(h.mgr.keys)-1]; k != "" {
		t.Fatalf("an agent with a node ID sent key %q", k)
	}
}

// A poll answer naming a new cluster leader (the managers answer parked
// polls when the leadership moves) brings the heartbeat forward, within
// a tenth of the period, so the new leader hears the node without
// waiting out the period; so does the session's first answer to name a
// leader when it came before the poll's wait ran out; answers naming
// the same one do not. Each answer comes right after a beat.
func TestRunnerBeatsWhenAPollNamesANewLeader(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.mgr.period = 5 * time.Second
	h.start()
	h.mgr.until(t, "a heartbeat and a waiting poll", func() bool { return len(h.mgr.hbAt) >= 1 && len(h.mgr.polls) >= 1 })
	// answerAfterBeat answers the waiting poll naming leader as soon as a
	// heartbeat came, and returns how long after the answer the next
	// heartbeat came.
	answerAfterBeat := func(leader string) time.Duration {
		var beats int
		h.mgr.do(func() { beats = len(h.mgr.hbAt) })
		h.mgr.until(t, "a heartbeat", func() bool { return len(h.mgr.hbAt) > beats })
		var at time.Time
		h.mgr.do(func() {
			c := h.mgr.polls[len(h.mgr.polls)-1].Cursor
			h.mgr.frames = append(h.mgr.frames, &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: c, ResultsIn: c, Leader: leader})
			at, beats = h.mgr.clk.Now(), len(h.mgr.hbAt)
		})
		h.mgr.until(t, "the answer taken and the next heartbeat", func() bool { return len(h.mgr.frames) == 0 && len(h.mgr.hbAt) > beats })
		var d time.Duration
		h.mgr.do(func() { d = h.mgr.hbAt[beats].Sub(at) })
		return d
	}
	// The first poll after a start asks with no wait; its answer names
	// no leader (a ramp's answers carry changes, no leader).
	if d := answerAfterBeat(""); d < 4*time.Second {
		t.Fatalf("an answer naming no leader brought the heartbeat forward: it came %v after, period 5s", d)
	}
	// The session's first answer to name a leader came before the
	// poll's wait ran out: the leadership moved while it waited.
	if d := answerAfterBeat("m1:7700"); d > 500*time.Millisecond {
		t.Fatalf("the heartbeat came %v after the first poll answer, early, named a leader, want within a tenth of the 5s period", d)
	}
	for _, leader := range []string{"m1:7700", "m1:7700"} {
		if d := answerAfterBeat(leader); d < 4*time.Second {
			t.Fatalf("an answer naming %s (not a change) brought the heartbeat forward: it came %v after, period 5s", leader, d)
		}
	}
	if d := answerAfterBeat("m2:7700"); d > 500*time.Millisecond {
		t.Fatalf("the heartbeat came %v after a poll answer named a new leader, want within a tenth of the 5s period", d)
	}
}

// A poll asked in a session that ended meanwhile is not applied: the new
// session dropped the specs no task used, and the old session's answer
// leaves out the specs that session sent before, so its task found no
// spec and was rejected. Asked again on the new session, the task runs.
func TestRunnerDropsAnAnswerToAnEndedSessionsPoll(t *testing.T) {
	h := newHarness(t, SimConfig{})
	h.start()
	h.mgr.push(completeFrame(3, asg(1, sm.DesiredRunning)))
	h.mgr.until(t, "task 1 running", func() bool { return h.acceptedState(1) == sm.StateRunning })
	h.mgr.push(incFrame(3, 4, nil, 1)) // removed: the spec is no longer used
	h.mgr.until(t, "a poll from cursor 4", func() bool {
		n := len(h.mgr.polls)
		return n > 0 && h.mgr.polls[n-1].Cursor.Get(0) == 4
	})
	// The session ends while that poll waits; the agent opens another.
	h.mgr.do(func() { h.mgr.stale, h.mgr.session = true, 0 })
	h.mgr.until(t, "a second session", func() bool { return h.mgr.sessionNo == 2 })
	h.mgr.until(t, "the new session's first heartbeat", func() bool {
		i := slices.Index(h.mgr.log, "open node=7")
		return i >= 0 && slices.Contains(h.mgr.log[i:], "hb")
	})
	// The old session's poll is answered with a task of the spec it sent
	// before (so not in this frame).
	h.mgr.push(incFrame(4, 5, []wire.Assignment{asg(2, sm.DesiredRunning)}))
	h.mgr.until(t, "the frame taken", func() bool { return len(h.mgr.frames) == 0 })
	h.mgr.do(func() { h.mgr.stale = false })
	// The new session answers from the same cursor with the spec.
	fr := incFrame(4, 5, []wire.Assignment{asg(2, sm.DesiredRunning)})
	fr.Specs = []wire.Spec{webSpec}
	h.mgr.push(fr)
	h.mgr.until(t, "task 2 running", func() bool {
		st := h.acceptedState(2)
		return st == sm.StateRunning || st == sm.StateRejected
	})
	if st := h.acceptedState(2); st != sm.StateRunning {
		t.Fatalf("task 2 is %v, want running (%+v)", st, h.mgr.latest[2])
	}
}

// A turn of the runner on the machine that writes to the store allocates
// nothing of its own: the writes handed to the store's Apply were a Ready
// on the heap at every turn (its address escaped through the Store
// interface).
func TestWithMachineAllocatesNothing(t *testing.T) {
	a, err := New(Config{Manager: newFakeManager(clock.NewFake(t0)), Store: NewMemStore(), Clock: clock.NewFake(t0),
		Executor: NewSimExecutor(clock.NewFake(t0), SimConfig{}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	turn := func() { a.withMachine(func(m *Machine, _ time.Time) { m.metaDirty = true }) }
	turn() // the store's own slices
	if n := testing.AllocsPerRun(100, turn); n != 0 {
		t.Errorf("a turn that writes the position allocates %v times, want 0", n)
	}
}
