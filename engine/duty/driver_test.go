package duty

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/sched"
	"shoal/statemachine"
)

// zoneNodes returns upserts of n ready nodes with 4 cores and 8 GiB each;
// the first half in zone a, the rest in zone b.
func zoneNodes(n int) []statemachine.Command {
	var cmds []statemachine.Command
	for i := 1; i <= n; i++ {
		zone := "a"
		if i > n/2 {
			zone = "b"
		}
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
			ID: statemachine.NodeID(i), Name: fmt.Sprintf("node-%d", i), Role: statemachine.RoleWorker,
			Labels: map[string]string{"zone": zone}, CPU: 4000, Memory: 8 << 30, Status: statemachine.NodeReady,
		}})
	}
	return cmds
}

func createSpec(spec statemachine.ServiceSpec) statemachine.Command {
	return statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &spec}
}

func runOnce(t testing.TB, d *Driver) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := d.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// placement reads, per service name, how many live tasks each node holds.
func placement(t testing.TB, e *Memory) map[string]map[statemachine.NodeID]int {
	t.Helper()
	out := map[string]map[statemachine.NodeID]int{}
	for g := 1; g <= e.Groups(); g++ {
		err := e.Read(context.Background(), g, func(s *statemachine.State) {
			for _, id := range s.TaskIDs() {
				tk := s.Task(id)
				if tk.Status.State < statemachine.StateAssigned || tk.Status.State.Terminal() || tk.Desired.Stopping() {
					continue
				}
				name := s.Service(tk.Service).Spec.Name
				if out[name] == nil {
					out[name] = map[statemachine.NodeID]int{}
				}
				out[name][tk.Node]++
				if s.Service(tk.Service).Spec.Mode == statemachine.ModeGlobal && statemachine.NodeID(tk.Slot) != tk.Node {
					t.Errorf("global task %d of %s is on node %d, its slot is node %d", id, name, tk.Node, tk.Slot)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func pendingCount(t testing.TB, e *Memory) int {
	t.Helper()
	return len(tasksWhere(t, e, func(tk *statemachine.Task) bool {
		return tk.Status.State == statemachine.StatePending && !tk.Desired.Stopping()
	}))
}

// spreadOK reports whether counts over nodes differ by at most one.
func spreadOK(counts map[statemachine.NodeID]int, nodes []statemachine.NodeID) bool {
	lo, hi := 1<<30, -1
	for _, n := range nodes {
		lo, hi = min(lo, counts[n]), max(hi, counts[n])
	}
	return hi-lo <= 1
}

func nodeRange(from, to int) []statemachine.NodeID {
	var ns []statemachine.NodeID
	for i := from; i <= to; i++ {
		ns = append(ns, statemachine.NodeID(i))
	}
	return ns
}

// Every pending task gets a node: replicated tasks spread evenly,
// constraints honoured, global tasks on their own node; a drained node takes
// nothing new.
func TestDriverPlaces(t *testing.T) {
	e := newMem(t, 3, nil)
	mustSubmit(t, e, zoneNodes(6)...)
	mustSubmit(t, e,
		createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 12, CPU: 100, Memory: 64 << 20}),
		createSpec(statemachine.ServiceSpec{Name: "db", Replicas: 3, Constraints: []string{"node.labels.zone==b"}}),
		createSpec(statemachine.ServiceSpec{Name: "mon", Mode: statemachine.ModeGlobal, CPU: 50}),
		createSpec(statemachine.ServiceSpec{Name: "cache", Replicas: 4, Constraints: []string{"node.labels.zone!=b", "node.role==worker"}}),
	)
	d := NewDriver(e, DriverConfig{})
	if got := runOnce(t, d); got != 12+3+6+4 {
		t.Fatalf("placed %d tasks, want %d (stats %+v, unschedulable %v)", got, 25, d.LastRun(), d.Unschedulable())
	}
	if n := pendingCount(t, e); n != 0 {
		t.Fatalf("%d tasks still pending", n)
	}
	pl := placement(t, e)
	if !spreadOK(pl["web"], nodeRange(1, 6)) || len(pl["web"]) != 6 {
		t.Errorf("web is not spread evenly: %v", pl["web"])
	}
	for n, c := range pl["db"] {
		if n < 4 || c != 1 {
			t.Errorf("db: %d tasks on node %d; want one on each zone-b node (4..6): %v", c, n, pl["db"])
		}
	}
	for n := range pl["cache"] {
		if n > 3 {
			t.Errorf("cache placed on zone-b node %d: %v", n, pl["cache"])
		}
	}
	if !spreadOK(pl["cache"], nodeRange(1, 3)) {
		t.Errorf("cache is not spread over zone a: %v", pl["cache"])
	}
	for _, n := range nodeRange(1, 6) {
		if pl["mon"][n] != 1 {
			t.Errorf("global mon: %d tasks on node %d, want 1", pl["mon"][n], n)
		}
	}
	// Nothing left: the next run rescans (its own assignments changed the
	// groups) and places nothing; the one after skips the scan.
	if got := runOnce(t, d); got != 0 {
		t.Errorf("second run placed %d", got)
	}
	if got := runOnce(t, d); got != 0 || !d.LastRun().Skipped {
		t.Errorf("third run placed %d, stats %+v; want a skipped scan", got, d.LastRun())
	}

	// Drain node 6 and scale web up: the orchestrator moves node 6's tasks
	// away (replacements are pending), and neither they nor the new tasks
	// land on node 6.
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdSetAvailability, Node: 6, Availability: statemachine.AvailDrain})
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpdateService,
		Spec: &statemachine.ServiceSpec{Name: "web", Replicas: 18, CPU: 100, Memory: 64 << 20}})
	want := pendingCount(t, e)
	if want < 6 {
		t.Fatalf("%d tasks pending after the scale-up, want at least web's 6 new ones", want)
	}
	if got := runOnce(t, d); got != want {
		t.Fatalf("after the drain and scale-up placed %d, want %d (stats %+v)", got, want, d.LastRun())
	}
	after := placement(t, e)
	for name, counts := range after {
		if counts[6] != 0 {
			t.Errorf("%s: %d live tasks on drained node 6", name, counts[6])
		}
	}
	total := 0
	for _, c := range after["web"] {
		total += c
	}
	if total != 18 || !spreadOK(after["web"], nodeRange(1, 5)) {
		t.Errorf("web: %v; want 18 tasks spread evenly over nodes 1..5", after["web"])
	}
	for n := range after["db"] {
		if n != 4 && n != 5 {
			t.Errorf("db moved to node %d, outside zone b: %v", n, after["db"])
		}
	}
}

// Tasks that fit nowhere stay pending with the reason, reported by
// Unschedulable and logged once however often they are seen. (A constraint
// the scheduler cannot parse never gets this far: the state machine refuses
// the spec with the parser's error.)
func TestDriverUnschedulable(t *testing.T) {
	e := newMem(t, 2, nil)
	mustSubmit(t, e, zoneNodes(2)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	odd := e.SubmitMany(ctx, []statemachine.Command{createSpec(statemachine.ServiceSpec{Name: "odd", Replicas: 2, Constraints: []string{"node.flavor==x"}})})
	if err := odd[0].Err(); !errors.Is(err, statemachine.ErrInvalid) || !strings.Contains(err.Error(), "node.flavor") {
		t.Fatalf("a spec with an unknown constraint field: %v; want it refused, naming the field", err)
	}
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "huge", Replicas: 3, CPU: 3000}))
	var mu sync.Mutex
	var logs []string
	d := NewDriver(e, DriverConfig{Logf: func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}})
	if got := runOnce(t, d); got != 2 {
		t.Fatalf("placed %d; want 2 of huge (one per node)", got)
	}
	for i := range 3 {
		// Another service each round, so every run scans again.
		mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: fmt.Sprintf("filler-%d", i), Replicas: 1}))
		if got := runOnce(t, d); got != 1 {
			t.Fatalf("round %d placed %d, want the filler's 1", i, got)
		}
	}
	un := d.Unschedulable()
	if len(un) != 1 {
		t.Fatalf("unschedulable: %+v, want huge", un)
	}
	byName := map[string]Unschedulable{}
	for _, u := range un {
		byName[u.Name] = u
	}
	if u := byName["huge"]; u.Pending != 1 || !errors.Is(u.Err, sched.ErrNoSuitableNode) {
		t.Errorf("huge: %+v, want 1 pending with ErrNoSuitableNode", u)
	}
	if n := pendingCount(t, e); n != 1 {
		t.Errorf("%d tasks pending, want huge's 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	count := func(s string) (n int) {
		for _, l := range logs {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}
	if count(`"huge"`) != 1 || len(logs) != 1 {
		t.Errorf("want one log line for huge, got %q", logs)
	}
}

// An assignment the group rejects (its node went down between placement
// and commit) is taken back out of the table; the task stays pending and a
// later run places it elsewhere.
func TestDriverRejectionCorrectsTable(t *testing.T) {
	e := newMem(t, 2, nil)
	mustSubmit(t, e, zoneNodes(2)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 4, CPU: 100, Memory: 1 << 20}))
	d := NewDriver(e, DriverConfig{})
	// Node 1 goes down between the plan and the commit: the groups reject
	// its two assignments.
	downed := false
	e.FailSubmissions(func(c statemachine.Command) error {
		if c.Kind == statemachine.CmdAssign && !downed {
			downed = true
			mustSubmitLocked(t, e, statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeDown})
		}
		return nil
	})
	placed, err := d.RunOnce(context.Background())
	if err != nil || placed != 2 {
		t.Fatalf("run: placed %d, err %v; want node 2's 2", placed, err)
	}
	if st := d.LastRun(); st.Rejected != 2 {
		t.Errorf("stats %+v, want 2 rejected", st)
	}
	if cpu, mem, n, _ := d.table.Reserved(1); cpu != 0 || mem != 0 || n != 0 {
		t.Errorf("node 1 still holds %d tasks (%d mcpu, %d bytes) in the table after its assignments were rejected", n, cpu, mem)
	}
	if got := runOnce(t, d); got != 2 {
		t.Fatalf("next run placed %d, want the 2 rejected ones", got)
	}
	if pl := placement(t, e); pl["web"][2] != 4 || pl["web"][1] != 0 {
		t.Errorf("web: %v, want all 4 on node 2", pl["web"])
	}
}

// As a duty, the driver places tasks as soon as they become pending (the
// Signal wired into OnApply), without waiting for its interval.
func TestDriverDutyOnPending(t *testing.T) {
	sig := NewSignal()
	e := newMem(t, 2, nil)
	e.OnApply(sig.OnApply)
	mustSubmit(t, e, zoneNodes(3)...)
	clk := newFakeClock()
	d := NewDriver(e, DriverConfig{Signal: sig, Interval: time.Hour, Clock: clk})
	stop := runDuty(t, d.Run)
	defer stop()
	blockUntil(t, clk, 1) // the first run found nothing; waiting an hour
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 9}))
	// The signal woke the driver, which waits out MinGap (20ms) from the
	// first run's start; then it runs and waits an hour again.
	blockUntil(t, clk, 2)
	clk.Advance(20 * time.Millisecond)
	blockUntil(t, clk, 2)
	n := len(tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StateAssigned }))
	if n != 9 {
		t.Fatalf("%d of 9 tasks assigned", n)
	}
}

// Without a signal the driver still runs every Interval of its clock.
func TestDriverDutyInterval(t *testing.T) {
	e := newMem(t, 1, nil)
	mustSubmit(t, e, zoneNodes(2)...)
	clk := newFakeClock()
	d := NewDriver(e, DriverConfig{Clock: clk, Interval: 10 * time.Second})
	stop := runDuty(t, d.Run)
	defer stop()
	// The first run finds nothing; then the driver waits for its interval.
	blockUntil(t, clk, 1)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "web", Replicas: 4}))
	clk.Advance(9 * time.Second)
	if n := pendingCount(t, e); n != 4 {
		t.Fatalf("%d tasks pending before the interval passed, want 4", n)
	}
	clk.Advance(time.Second)
	blockUntil(t, clk, 1) // the run is done: the driver waits again
	settled(t, func() (bool, string) {
		n := pendingCount(t, e)
		return n == 0, fmt.Sprintf("%d tasks still pending after the interval", n)
	})
}
