package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/statemachine"
)

// stepClock is a deterministic clock for stamping entries: every reading is
// one millisecond after the previous one. Back-off waits and timers are
// real.
type stepClock struct {
	clock.Real
	n atomic.Int64
}

func (c *stepClock) Now() time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(c.n.Add(1)) * time.Millisecond)
}

// testConfig is a small, quick configuration for tests.
func testConfig(groups int) Config {
	return Config{
		Groups:             groups,
		RTT:                20 * time.Millisecond,
		HeartbeatRTT:       3,
		ElectionRTT:        40,
		SnapshotEntries:    64,
		CompactionOverhead: 16,
		ProposeTimeout:     20 * time.Second,
		// No time entries: tests compare a group's state across pauses
		// (TestLateEntryRefusedInAnIdleGroup turns them on).
		TimeBeat:     -1,
		Clock:        &stepClock{},
		RaftLogLevel: "critical", // peers stopped on purpose make the transport complain
	}
}

func startLocal(t testing.TB, n int, cfg Config) *Local {
	t.Helper()
	l, err := StartLocal(t.TempDir(), n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// eventually polls cond until it holds or the deadline passes; cond says
// what it is still waiting for.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, what := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("still waiting after %s: %s", timeout, what)
		case <-tick.C:
		}
	}
}

// submitters holds each engine's duty.Submitter (*Engine to
// *duty.Submitter): tests submit node and network commands through it, as
// manager.Start wires it, so removals are checked with every service group
// first and the cluster group's outbox reaches the service groups before a
// submission returns.
var submitters sync.Map

func submitter(e *Engine) *duty.Submitter {
	if s, ok := submitters.Load(e); ok {
		return s.(*duty.Submitter)
	}
	s, _ := submitters.LoadOrStore(e, duty.NewSubmitter(e, e.cfg.Logf))
	return s.(*duty.Submitter)
}

// submitAll submits cmds in chunks from many goroutines (so the proposer
// coalesces them) and fails on any error. It returns how many commands it
// submitted.
func submitAll(t testing.TB, e *Engine, cmds []statemachine.Command) int {
	t.Helper()
	const chunk, workers = 200, 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= len(cmds) {
					return
				}
				part := cmds[lo:min(lo+chunk, len(cmds))]
				for i, o := range submitter(e).SubmitMany(ctx, part) {
					if err := o.Err(); err != nil {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("%s: %w", part[i].Kind, err)
						}
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	return len(cmds)
}

func addNodes(n int) []statemachine.Command {
	var cmds []statemachine.Command
	for i := 1; i <= n; i++ {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%d", i), CPU: 64000, Memory: 1 << 40}})
	}
	return cmds
}

func createServices(prefix string, n int, replicas uint32) []statemachine.Command {
	var cmds []statemachine.Command
	for i := range n {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: fmt.Sprintf("%s-%d", prefix, i), Replicas: replicas, Image: "busybox"}})
	}
	return cmds
}

// tasksWhere reads (linearizably) every service group's tasks that match.
func tasksWhere(t testing.TB, e *Engine, match func(*statemachine.Task) bool) []*statemachine.Task {
	t.Helper()
	var out []*statemachine.Task
	for g := 1; g <= e.Groups(); g++ {
		err := e.Read(context.Background(), g, func(s *statemachine.State) {
			for _, id := range s.TaskIDs() {
				if tk := s.Task(id); match(tk) {
					c := *tk
					out = append(out, &c)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// assignPending assigns every pending task round-robin over nodes 1..nodes.
func assignPending(t testing.TB, e *Engine, nodes int) []statemachine.Command {
	var cmds []statemachine.Command
	for i, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StatePending }) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdAssign, Task: tk.ID, Node: statemachine.NodeID(i%nodes + 1)})
	}
	return cmds
}

// reports moves every live task that is below `to` (and at least assigned)
// to `to`, as its agent would report.
func reports(t testing.TB, e *Engine, to statemachine.TaskState) []statemachine.Command {
	var cmds []statemachine.Command
	live := func(tk *statemachine.Task) bool {
		return tk.Status.State >= statemachine.StateAssigned && tk.Status.State < to && !tk.Desired.Stopping()
	}
	for _, tk := range tasksWhere(t, e, live) {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: tk.Node, State: to})
	}
	return cmds
}

// groupView is one replica's view of one group.
type groupView struct {
	index, hash uint64
	invariants  error
}

// view reads one group on one replica; ok=false while the replica is still
// loading it.
func view(t testing.TB, e *Engine, g int) (v groupView, ok bool) {
	t.Helper()
	err := e.ReadLocal(g, func(s *statemachine.State) {
		v.index, v.hash, v.invariants = s.LastIndex(), s.Hash(), s.CheckInvariants()
	})
	if errors.Is(err, ErrNotReady) {
		return v, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// converged waits until every engine has applied the same last index in
// every group, fails if their states differ there, and returns the hashes.
func converged(t testing.TB, engines []*Engine) []uint64 {
	t.Helper()
	groups := engines[0].Groups()
	hashes := make([]uint64, groups+1)
	for g := 0; g <= groups; g++ {
		eventually(t, 60*time.Second, func() (bool, string) {
			vs := make([]groupView, len(engines))
			for i, e := range engines {
				var ok bool
				if vs[i], ok = view(t, e, g); !ok {
					return false, fmt.Sprintf("replica %d still loading group %d", e.ReplicaID(), g)
				}
			}
			for i := range vs {
				if vs[i].index != vs[0].index {
					return false, fmt.Sprintf("group %d: replica indexes differ: %+v", g, vs)
				}
			}
			for i, v := range vs {
				if v.hash != vs[0].hash {
					t.Fatalf("group %d diverged at index %d: replica %d hash %x, replica %d hash %x",
						g, v.index, engines[0].ReplicaID(), vs[0].hash, engines[i].ReplicaID(), v.hash)
				}
				if v.invariants != nil {
					t.Fatalf("group %d on replica %d: %v", g, engines[i].ReplicaID(), v.invariants)
				}
			}
			hashes[g] = vs[0].hash
			return true, ""
		})
	}
	return hashes
}

// waitLeaderAmong waits until every engine sees, for every group, a leader
// that is one of ids.
func waitLeaderAmong(t testing.TB, engines []*Engine, ids ...uint64) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, e := range engines {
			for g := 0; g <= e.Groups(); g++ {
				id, ok := e.Leader(g)
				if !ok || !slices.Contains(ids, id) {
					return false, fmt.Sprintf("replica %d sees leader %d (known %t) for group %d, want one of %v", e.ReplicaID(), id, ok, g, ids)
				}
			}
		}
		return true, ""
	})
}
