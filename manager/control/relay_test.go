package control

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"shoal/cluster"
	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// nodeBeats is a leader's node monitor for the relay's tests: it records
// each heartbeat and hands node N a period of N seconds; node 7 (removed
// in agentsOver's state) and node 9 (never created) it does not know.
type nodeBeats struct {
	mu    sync.Mutex
	beats map[sm.NodeID]int
}

func (m *nodeBeats) Heartbeat(_ context.Context, node sm.NodeID, _ time.Time) (time.Duration, error) {
	if node == 7 || node == 9 {
		return 0, cluster.ErrUnknownNode
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.beats == nil {
		m.beats = map[sm.NodeID]int{}
	}
	m.beats[node]++
	return time.Duration(node) * time.Second, nil
}
func (m *nodeBeats) Period(int) time.Duration                   { return time.Second }
func (m *nodeBeats) NodeStatus(sm.NodeID) (sm.NodeStatus, bool) { return sm.NodeReady, true }
func (m *nodeBeats) MarkReReported(sm.NodeID) bool              { return false }

func (m *nodeBeats) count(node sm.NodeID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beats[node]
}

// loopLink is a LeaderLink in process: each call goes to the leader's
// RelayedHeartbeats (its errors sent as wire errors, as the API does),
// or fails with err; it records the nodes of each call.
type loopLink struct {
	leader *Agents
	err    error
	block  bool // the call waits for its context to end
	mu     sync.Mutex
	calls  [][]sm.NodeID
	addrs  []string
}

func (l *loopLink) RelayHeartbeats(ctx context.Context, leader string, beats []wire.Heartbeat) ([]BeatAnswer, error) {
	var nodes []sm.NodeID
	for _, b := range beats {
		nodes = append(nodes, b.NodeID)
	}
	l.mu.Lock()
	l.calls = append(l.calls, nodes)
	l.addrs = append(l.addrs, leader)
	l.mu.Unlock()
	if l.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if l.err != nil {
		return nil, l.err
	}
	out := l.leader.RelayedHeartbeats(ctx, beats)
	for i := range out {
		var we *wire.Error
		if out[i].Err != nil && !errors.As(out[i].Err, &we) {
			out[i].Err = &wire.Error{Code: wire.CodeInternal, Message: out[i].Err.Error()}
		}
	}
	return out, nil
}

func (l *loopLink) seen() ([][]sm.NodeID, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls), slices.Clone(l.addrs)
}

// relayWorld is a leader (replica 2 in the follower's eyes, at m2:7700)
// and a follower (replica 1) that relays to it through link, on a fake
// clock.
type relayWorld struct {
	clk      *clock.Fake
	mon      *nodeBeats
	link     *loopLink
	follower *Agents
}

func newRelayWorld(t *testing.T, leaderKnown bool, rc RelayConfig) *relayWorld {
	w := &relayWorld{clk: clock.NewFake(time.Unix(1_700_000_000, 0)), mon: &nodeBeats{}}
	leader := agentsWith(t, AgentsConfig{Leaders: seat{1}, Self: seat{1}, Monitor: w.mon})
	w.link = &loopLink{leader: leader}
	known := seat{2}
	if !leaderKnown {
		known = seat{0}
	}
	w.follower = agentsWith(t, AgentsConfig{Leaders: known, Self: known, Clock: w.clk, Link: w.link, Relay: rc,
		Monitor: beat{err: fmt.Errorf("node: %w", cluster.ErrNotMonitoring)}})
	return w
}

type beatResult struct {
	node sm.NodeID
	ack  *wire.HeartbeatAck
	err  error
}

// beat sends the nodes' heartbeats to the follower at once and returns
// their answers, advancing the fake clock by step whenever the relay loop
// waits on it beside the heartbeats themselves (its linger), or when all
// of them wait (the relay's wait).
func (w *relayWorld) beat(t *testing.T, step time.Duration, nodes ...sm.NodeID) map[sm.NodeID]beatResult {
	t.Helper()
	results := make(chan beatResult, len(nodes))
	for _, n := range nodes {
		go func() {
			ack, err := w.follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: n, SessionID: 1})
			results <- beatResult{n, ack, err}
		}()
	}
	got := map[sm.NodeID]beatResult{}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(nodes) {
		select {
		case r := <-results:
			got[r.node] = r
			continue
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d heartbeats answered after 10s; calls %v", len(got), len(nodes), w.link.calls)
		}
		if w.clk.Waiters() > len(nodes)-len(got) {
			w.clk.Advance(step)
		}
		runtime.Gosched()
	}
	return got
}

// A follower relays heartbeats to the leader, several in one call, and
// answers each agent with the leader's answer to its own heartbeat: an ack
// with that node's period, or the refusal of that node (removed; not
// known yet).
func TestRelayAnswersEachAgentItsOwn(t *testing.T) {
	w := newRelayWorld(t, true, RelayConfig{})
	got := w.beat(t, 20*time.Millisecond, 5, 6, 7, 8, 9)
	for _, n := range []sm.NodeID{5, 6, 8} {
		r := got[n]
		if r.err != nil || r.ack.Period != int64(time.Duration(n)*time.Second) || r.ack.Status != sm.NodeReady {
			t.Errorf("node %d: %+v, %v; want its own ack (period %ds, ready)", n, r.ack, r.err, n)
		}
		if c := w.mon.count(n); c != 1 {
			t.Errorf("node %d: the leader's monitor saw %d heartbeats, want 1", n, c)
		}
	}
	if r := got[7]; code(r.err) != wire.CodeNodeRemoved {
		t.Errorf("node 7 (removed): %+v, %v; want node_removed", r.ack, r.err)
	}
	if r := got[9]; code(r.err) != wire.CodeUnavailable {
		t.Errorf("node 9 (not known yet): %+v, %v; want unavailable", r.ack, r.err)
	}
	calls, addrs := w.link.seen()
	if len(calls) != 1 || len(calls[0]) != 5 || addrs[0] != "m2:7700" {
		t.Errorf("the follower called the leader %d times (%v, at %v); want once with all five heartbeats, at m2:7700", len(calls), calls, addrs)
	}
}

func code(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

// A queue longer than a batch goes to the leader in several calls, none
// longer than MaxBatch, and every agent still gets its own answer.
func TestRelaySplitsBatches(t *testing.T) {
	w := newRelayWorld(t, true, RelayConfig{MaxBatch: 3, InFlight: 8})
	nodes := []sm.NodeID{10, 11, 12, 13, 14, 15, 16}
	got := w.beat(t, 20*time.Millisecond, nodes...)
	for _, n := range nodes {
		if r := got[n]; r.err != nil || r.ack.Period != int64(time.Duration(n)*time.Second) {
			t.Errorf("node %d: %+v, %v; want its own ack", n, r.ack, r.err)
		}
	}
	calls, _ := w.link.seen()
	total := 0
	for _, c := range calls {
		if len(c) > 3 {
			t.Errorf("a call to the leader carried %d heartbeats (%v); the limit is 3", len(c), c)
		}
		total += len(c)
	}
	if total != len(nodes) || len(calls) < 3 {
		t.Errorf("calls %v: %d heartbeats in %d calls; want %d in at least 3", calls, total, len(calls), len(nodes))
	}
}

// Where the follower cannot relay it answers as a follower that does not
// relay: knowing no leader, unavailable with a retry delay (and the leader
// is not called); the relay failed, or got no answer within its wait,
// not_leader naming the leader, so that the agent heartbeats it directly.
func TestRelayFallsBack(t *testing.T) {
	notLeader := &wire.Error{Code: wire.CodeNotLeader, Leader: "m2:7700", RetryAfter: int64(200 * time.Millisecond),
		Message: "this manager does not lead the cluster; send heartbeats to the leader"}
	t.Run("no leader known", func(t *testing.T) {
		// Held for the relay's wait (a leader may be elected meanwhile:
		// TestRelayHoldsHeartbeatsThroughALeaderChange), then answered.
		w := newRelayWorld(t, false, RelayConfig{})
		done := make(chan error, 1)
		go func() {
			_, err := w.follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: 5, SessionID: 1})
			done <- err
		}()
		if err := w.clk.BlockUntil(1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		w.clk.Advance(750 * time.Millisecond)
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("no answer when the relay's wait ended")
		}
		want := &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(500 * time.Millisecond),
			Message: "this manager does not know the cluster's leader right now; retry"}
		if fmt.Sprintf("%+v", err) != fmt.Sprintf("%+v", want) {
			t.Errorf("got %v; want %v", err, want)
		}
		if calls, _ := w.link.seen(); len(calls) != 0 {
			t.Errorf("the follower called a leader it does not know: %v", calls)
		}
	})
	t.Run("relay failed", func(t *testing.T) {
		w := newRelayWorld(t, true, RelayConfig{})
		w.link.err = errors.New("connection refused")
		r := w.beat(t, 20*time.Millisecond, 5, 6)
		for _, n := range []sm.NodeID{5, 6} {
			if fmt.Sprintf("%+v", r[n].err) != fmt.Sprintf("%+v", notLeader) {
				t.Errorf("node %d: %+v, %v; want %v", n, r[n].ack, r[n].err, notLeader)
			}
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		w := newRelayWorld(t, true, RelayConfig{Wait: 300 * time.Millisecond})
		w.link.block = true
		done := make(chan error, 1)
		go func() {
			_, err := w.follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: 5, SessionID: 1})
			done <- err
		}()
		if err := w.clk.BlockUntil(2, 10*time.Second); err != nil { // the heartbeat's wait, the loop's linger
			t.Fatal(err)
		}
		w.clk.Advance(20 * time.Millisecond)
		for calls, _ := w.link.seen(); len(calls) == 0; calls, _ = w.link.seen() {
			runtime.Gosched()
		}
		w.clk.Advance(300 * time.Millisecond) // the relay's wait ends; the call still waits
		select {
		case err := <-done:
			if fmt.Sprintf("%+v", err) != fmt.Sprintf("%+v", notLeader) {
				t.Errorf("got %v; want %v", err, notLeader)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the heartbeat was not answered when the relay's wait ended")
		}
	})
}

// Without a link a follower refuses heartbeats as before the relay, and a
// relayed heartbeat that reaches a replica which does not lead is refused
// (never relayed again).
func TestRelayedHeartbeatNotRelayedAgain(t *testing.T) {
	w := newRelayWorld(t, true, RelayConfig{})
	// On the wall clock: a relay loop started by mistake sends its batch.
	w.follower = agentsWith(t, AgentsConfig{Leaders: seat{2}, Self: seat{2}, Link: w.link,
		Monitor: beat{err: fmt.Errorf("node: %w", cluster.ErrNotMonitoring)}})
	out := w.follower.RelayedHeartbeats(context.Background(), []wire.Heartbeat{{NodeID: 5}, {NodeID: 6}})
	for i, a := range out {
		if code(a.Err) != wire.CodeNotLeader || a.Ack != nil {
			t.Errorf("entry %d: %+v; want not_leader", i, a)
		}
	}
	if calls, _ := w.link.seen(); len(calls) != 0 {
		t.Errorf("a relayed heartbeat was relayed again: %v", calls)
	}
}

// A leader that answered a relayed batch within the last period is slow,
// not gone: a heartbeat it does not answer in time is answered
// "unavailable, retry" (the agent retries here) instead of sending the
// agent to the leader directly, and the relay waits half the period the
// leader handed out (node 6: 6 s, so 3 s), not the 750ms floor. Once the
// leader has answered nothing for a whole period, the agent is sent to it
// directly (not_leader).
func TestRelaySlowLeaderRetriesHere(t *testing.T) {
	w := newRelayWorld(t, true, RelayConfig{})
	if r := w.beat(t, 20*time.Millisecond, 6)[6]; r.err != nil || r.ack.Period != int64(6*time.Second) {
		t.Fatalf("first heartbeat: %+v, %v; want an ack with a 6s period", r.ack, r.err)
	}
	w.link.block = true
	slow := func(label string) (error, time.Duration) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := w.follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: 6, SessionID: 1})
			done <- err
		}()
		start := w.clk.Now()
		for {
			select {
			case err := <-done:
				return err, w.clk.Now().Sub(start)
			default:
			}
			if w.clk.Waiters() >= 1 { // the heartbeat's wait (and the loop's linger)
				w.clk.Advance(50 * time.Millisecond)
			}
			if w.clk.Now().Sub(start) > time.Minute {
				t.Fatalf("%s: no answer after a minute of the fake clock", label)
			}
			runtime.Gosched()
		}
	}
	err, took := slow("slow leader")
	if code(err) != wire.CodeUnavailable {
		t.Errorf("a heartbeat the slow leader did not answer in time: %v; want unavailable (retry here)", err)
	}
	if took < 3*time.Second || took > 4*time.Second {
		t.Errorf("the relay waited %s for the leader; want half the 6s period", took)
	}
	w.clk.Advance(6 * time.Second) // a whole period without an answer
	notLeader := &wire.Error{Code: wire.CodeNotLeader, Leader: "m2:7700", RetryAfter: int64(200 * time.Millisecond),
		Message: "this manager does not lead the cluster; send heartbeats to the leader"}
	if err, _ := slow("silent leader"); fmt.Sprintf("%+v", err) != fmt.Sprintf("%+v", notLeader) {
		t.Errorf("after a period without the leader's answer: %v; want %v", err, notLeader)
	}
}

// slowCommit is a leader's node monitor whose every heartbeat waits commit
// for a status change to commit (a reconnecting node's), or fails when
// its context ends first, as the engine's does.
type slowCommit struct{ commit time.Duration }

func (m slowCommit) Heartbeat(ctx context.Context, node sm.NodeID, _ time.Time) (time.Duration, error) {
	select {
	case <-time.After(m.commit):
		return 5 * time.Second, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("set node %d initializing: %w", node, ctx.Err())
	}
}
func (slowCommit) Period(int) time.Duration                   { return 5 * time.Second }
func (slowCommit) NodeStatus(sm.NodeID) (sm.NodeStatus, bool) { return sm.NodeInitializing, true }
func (slowCommit) MarkReReported(sm.NodeID) bool              { return false }

// A relayed heartbeat whose status change takes half a second to commit
// is acked through a follower that waits two seconds, as it is when sent
// to the leader directly: the leader's work on a batch is bounded by the
// follower's wait, not by a fixed 400ms.
func TestRelayedBeatGetsTheFollowersWait(t *testing.T) {
	leader := agentsWith(t, AgentsConfig{Leaders: seat{1}, Self: seat{1}, Monitor: slowCommit{500 * time.Millisecond}})
	follower := agentsWith(t, AgentsConfig{Leaders: seat{2}, Self: seat{2}, Link: &loopLink{leader: leader},
		Relay:   RelayConfig{Wait: 2 * time.Second},
		Monitor: beat{err: fmt.Errorf("node: %w", cluster.ErrNotMonitoring)}})
	if _, err := leader.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: 5, SessionID: 1}); err != nil {
		t.Fatalf("direct: %v", err)
	}
	if ack, err := follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: 5, SessionID: 1}); err != nil || ack.Period != int64(5*time.Second) {
		t.Errorf("through a follower: %+v, %v; want the ack the direct heartbeat got", ack, err)
	}
}

// ackAll is a leader's node monitor that still tracks every node (a
// removed one until its next tick) and acks each heartbeat.
type ackAll struct{}

func (ackAll) Heartbeat(context.Context, sm.NodeID, time.Time) (time.Duration, error) {
	return 5 * time.Second, nil
}
func (ackAll) Period(int) time.Duration                   { return 5 * time.Second }
func (ackAll) NodeStatus(sm.NodeID) (sm.NodeStatus, bool) { return sm.NodeDown, true }
func (ackAll) MarkReReported(sm.NodeID) bool              { return false }

// A relayed heartbeat of a node the leader's state lists as removed is
// refused node_removed even while the leader's monitor still tracks the
// node (a direct one is refused by the API's check before the monitor);
// the batch's other heartbeats are acked.
func TestRelayedBeatOfARemovedNode(t *testing.T) {
	leader := agentsWith(t, AgentsConfig{Leaders: seat{1}, Self: seat{1}, Monitor: ackAll{}})
	out := leader.RelayedHeartbeats(context.Background(), []wire.Heartbeat{{NodeID: 5}, {NodeID: 7}, {NodeID: 6}})
	if code(out[1].Err) != wire.CodeNodeRemoved || out[1].Ack != nil {
		t.Errorf("node 7 (removed): %+v; want node_removed", out[1])
	}
	for _, i := range []int{0, 2} {
		if out[i].Err != nil || out[i].Ack == nil {
			t.Errorf("entry %d: %+v; want an ack", i, out[i])
		}
	}
}

// movingLeader is the cluster's leadership as a follower (replica 1) sees
// it while it moves: set names a new leader (0: none, an election under
// way) and closes the notice channel handed out before.
type movingLeader struct {
	mu sync.Mutex
	id uint64
	ch chan struct{}
}

func newMovingLeader(id uint64) *movingLeader { return &movingLeader{id: id, ch: make(chan struct{})} }

func (m *movingLeader) set(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.id = id
	close(m.ch)
	m.ch = make(chan struct{})
}
func (m *movingLeader) Leader(int) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, m.id != 0
}
func (m *movingLeader) LeaderNotice(int) (uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, m.ch
}
func (m *movingLeader) Contact(int) cluster.Contact { return cluster.Contact{OK: true} }

// A heartbeat that reaches a follower while the leadership moves is held
// there, within the relay's wait, and relayed to the next leader once the
// follower hears of it: when the leader it was relaying to stops
// answering (killed), and while no leader is known (the election).
// Answered "retry" at once instead, each agent came back after a retry
// delay that grows with every failure, seconds after the new leader could
// have taken its heartbeat.
func TestRelayHoldsHeartbeatsThroughALeaderChange(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	mon := &nodeBeats{}
	leader := agentsWith(t, AgentsConfig{Leaders: seat{1}, Self: seat{1}, Monitor: mon})
	link := &loopLink{leader: leader}
	moving := newMovingLeader(2)
	follower := agentsWith(t, AgentsConfig{Leaders: moving, Self: seat{2}, Clock: clk, Link: link,
		Monitor: beat{err: fmt.Errorf("node: %w", cluster.ErrNotMonitoring)}})
	if _, err := follower.cfg.Cluster.Submit(context.Background(), sm.Command{Kind: sm.CmdSetManager, Seq: 3, Name: "m3:7700"}); err != nil {
		t.Fatal(err)
	}
	// heartbeat sends node's heartbeat to the follower; step runs the
	// fake clock on by 20ms (the relay's linger) while more than the
	// heartbeat's own wait waits on it.
	heartbeat := func(node sm.NodeID) <-chan beatResult {
		out := make(chan beatResult, 1)
		go func() {
			ack, err := follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: node, SessionID: 1})
			out <- beatResult{node, ack, err}
		}()
		return out
	}
	await := func(label string, out <-chan beatResult, until func()) beatResult {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			select {
			case r := <-out:
				return r
			default:
			}
			if until != nil {
				until()
			}
			if clk.Waiters() > 1 {
				clk.Advance(20 * time.Millisecond)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no answer after 10s", label)
			}
			runtime.Gosched()
		}
	}
	start := clk.Now()
	if r := await("first heartbeat", heartbeat(5), nil); r.err != nil || r.ack.Period != int64(5*time.Second) {
		t.Fatalf("first heartbeat: %+v, %v; want node 5's ack", r.ack, r.err)
	}

	// The leader is killed: the relay to it fails at once.
	link.mu.Lock()
	link.err = errors.New("connection refused")
	link.mu.Unlock()
	out := heartbeat(6)
	for calls, _ := link.seen(); len(calls) < 2; calls, _ = link.seen() {
		if clk.Waiters() > 1 {
			clk.Advance(20 * time.Millisecond)
		}
		runtime.Gosched()
	}
	select {
	case r := <-out:
		t.Fatalf("the relay to a leader that stopped answering failed, and the heartbeat was answered at once: %+v, %v; want it held for the next leader", r.ack, r.err)
	default:
	}
	moving.set(0) // the election
	link.mu.Lock()
	link.err = nil
	link.mu.Unlock()
	moving.set(3) // replica 3, at m3:7700, leads
	r := await("held heartbeat", out, nil)
	if r.err != nil || r.ack == nil || r.ack.Period != int64(6*time.Second) {
		t.Fatalf("held heartbeat: %+v, %v; want node 6's ack from the new leader", r.ack, r.err)
	}
	if _, addrs := link.seen(); addrs[len(addrs)-1] != "m3:7700" {
		t.Errorf("the held heartbeat went to %s; want the new leader at m3:7700", addrs[len(addrs)-1])
	}

	// A heartbeat that arrives during an election waits for its end.
	moving.set(0)
	out = heartbeat(8)
	if err := clk.BlockUntil(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	moving.set(2)
	if r := await("heartbeat during the election", out, nil); r.err != nil || r.ack.Period != int64(8*time.Second) {
		t.Fatalf("heartbeat during the election: %+v, %v; want node 8's ack from the elected leader", r.ack, r.err)
	}
	if took := clk.Now().Sub(start); took >= 2500*time.Millisecond {
		t.Errorf("the fake clock ran %s: a heartbeat waited out its hold", took)
	}
}

// startingMonitor is a new leader's node monitor that is still starting
// for its first `starting` heartbeats, then acks with a 5s period.
type startingMonitor struct {
	mu       sync.Mutex
	starting int
	calls    int
}

func (m *startingMonitor) Heartbeat(context.Context, sm.NodeID, time.Time) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.calls <= m.starting {
		return 0, cluster.ErrMonitorStarting
	}
	return 5 * time.Second, nil
}
func (m *startingMonitor) Period(int) time.Duration                   { return 5 * time.Second }
func (m *startingMonitor) NodeStatus(sm.NodeID) (sm.NodeStatus, bool) { return sm.NodeReady, true }
func (m *startingMonitor) MarkReReported(sm.NodeID) bool              { return false }

// A relayed heartbeat that a new leader answers "starting, retry shortly"
// is sent again by the follower after that delay, within the relay's
// wait, and its agent gets the ack: answered "retry", the agent came back
// after its own retry delay (0.25-0.5 s at a 5 s period, longer after
// each failure).
func TestRelayRetriesAStartingLeader(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	mon := &startingMonitor{starting: 2}
	leader := agentsWith(t, AgentsConfig{Leaders: seat{1}, Self: seat{1}, Monitor: mon})
	w := &relayWorld{clk: clk, link: &loopLink{leader: leader}}
	// A long wait: the loop below runs the fake clock on while the relay
	// works in real time.
	w.follower = agentsWith(t, AgentsConfig{Leaders: seat{2}, Self: seat{2}, Clock: clk, Link: w.link,
		Relay: RelayConfig{Wait: time.Minute}, Monitor: beat{err: fmt.Errorf("node: %w", cluster.ErrNotMonitoring)}})
	start := clk.Now()
	done := make(chan beatResult, 1)
	go func() {
		ack, err := w.follower.Heartbeat(context.Background(), &wire.Heartbeat{NodeID: 5, SessionID: 1})
		done <- beatResult{5, ack, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	var r beatResult
	for {
		select {
		case r = <-done:
		default:
			if time.Now().After(deadline) {
				t.Fatal("no answer after 10s")
			}
			if clk.Waiters() >= 1 { // the linger, the relay's wait, or the retry's delay
				clk.Advance(20 * time.Millisecond)
			}
			runtime.Gosched()
			continue
		}
		break
	}
	if r.err != nil || r.ack == nil || r.ack.Period != int64(5*time.Second) {
		t.Fatalf("got %+v, %v; want the ack the leader gave once started", r.ack, r.err)
	}
	mon.mu.Lock()
	calls := mon.calls
	mon.mu.Unlock()
	if calls != 3 {
		t.Errorf("the leader's monitor saw %d heartbeats; want 3 (two while starting, then the ack)", calls)
	}
	if took := clk.Now().Sub(start); took >= time.Minute {
		t.Errorf("answered after %s of the fake clock: the relay's wait ran out", took)
	}
}
