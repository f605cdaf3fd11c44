package statemachine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// harness applies commands one entry at a time and fails the test on a
// broken invariant.
type harness struct {
	t     *testing.T
	s     *State
	index uint64
	now   int64
	out   Output
}

func newHarness(t *testing.T, cfg Config) *harness {
	return &harness{t: t, s: New(cfg), now: 1_000_000_000}
}

// saveLoad returns the state a snapshot of s loads into.
func saveLoad(t testing.TB, s *State) *State {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	l := New(Config{})
	if err := l.Load(&buf); err != nil {
		t.Fatal(err)
	}
	return l
}

func (h *harness) apply(cmds ...Command) []Result {
	h.t.Helper()
	h.index++
	h.now += 1_000_000
	h.s.Apply(cmds, h.index, h.now, &h.out)
	if err := h.s.CheckInvariants(); err != nil {
		h.t.Fatalf("invariants after entry %d: %v", h.index, err)
	}
	return append([]Result(nil), h.out.Results...)
}

func (h *harness) ok(cmds ...Command) {
	h.t.Helper()
	for i, r := range h.apply(cmds...) {
		if r.Err() != nil {
			h.t.Fatalf("command %d (%s): %v", i, cmds[i].Kind, r.Err())
		}
	}
}

func (h *harness) addNodes(n int) {
	for i := 1; i <= n; i++ {
		h.ok(Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: "n" + string(rune('0'+i)), CPU: 4000, Memory: 1 << 33}})
	}
}

// tasksIn returns the service's tasks in ID order.
func (h *harness) tasksIn(name string) []*Task {
	svc := h.s.ServiceByName(name)
	if svc == nil {
		return nil
	}
	var out []*Task
	for _, id := range h.s.TaskIDs() {
		if t := h.s.Task(id); t.Service == svc.ID {
			out = append(out, t)
		}
	}
	return out
}

// placeAll assigns every pending task round-robin and reports them running.
func (h *harness) placeAll(nodes int) {
	var cmds []Command
	i := 0
	for _, id := range h.s.TaskIDs() {
		t := h.s.Task(id)
		if t.Status.State != StatePending {
			continue
		}
		node := NodeID(i%nodes + 1)
		if svc := h.s.Service(t.Service); svc.Spec.Mode == ModeGlobal {
			node = NodeID(t.Slot)
		}
		i++
		cmds = append(cmds, Command{Kind: CmdAssign, Task: id, Node: node})
	}
	h.ok(cmds...)
	cmds = cmds[:0]
	for _, id := range h.s.TaskIDs() {
		t := h.s.Task(id)
		if t.Status.State == StateAssigned {
			to := StateRunning
			if t.Desired == DesiredReady {
				to = StateReady // held back: prepared, not started
			}
			cmds = append(cmds, Command{Kind: CmdTaskStatus, Task: id, Node: t.Node, State: to})
		}
	}
	h.ok(cmds...)
}

func countState(ts []*Task, st TaskState, d DesiredState) int {
	n := 0
	for _, t := range ts {
		if t.Status.State == st && t.Desired == d {
			n++
		}
	}
	return n
}

func TestServiceLifecycle(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3}})
	ts := h.tasksIn("web")
	if len(ts) != 3 || countState(ts, StatePending, DesiredRunning) != 3 {
		t.Fatalf("want 3 pending tasks after create, got %d", len(ts))
	}
	h.placeAll(2)
	if got := countState(h.tasksIn("web"), StateRunning, DesiredRunning); got != 3 {
		t.Fatalf("want 3 running, got %d", got)
	}

	// A failed task is replaced in its slot; the dead one is kept as history.
	victim := h.tasksIn("web")[0]
	h.ok(Command{Kind: CmdTaskStatus, Task: victim.ID, Node: victim.Node, State: StateFailed, ExitCode: 3})
	if victim.Desired != DesiredShutdown {
		t.Fatalf("dead task desired %s, want shutdown", victim.Desired)
	}
	ts = h.tasksIn("web")
	if len(ts) != 4 || ts[3].Slot != victim.Slot || ts[3].Status.State != StatePending {
		t.Fatalf("want a pending replacement in slot %d, got %d tasks", victim.Slot, len(ts))
	}
	h.placeAll(2)

	// Scale down flags slot 3 remove; its task is deleted only after the
	// agent confirms shutdown.
	h.ok(Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "web", Replicas: 2}})
	var s3 *Task
	for _, x := range h.tasksIn("web") {
		if x.Slot == 3 {
			s3 = x
		}
	}
	if s3 == nil || s3.Desired != DesiredRemove || s3.Status.State != StateRunning {
		t.Fatalf("slot 3 task should be running with desired remove: %+v", s3)
	}
	h.ok(Command{Kind: CmdTaskStatus, Task: s3.ID, Node: s3.Node, State: StateShutdown})
	if h.s.Task(s3.ID) != nil {
		t.Fatalf("slot 3 task not reaped after confirmed shutdown")
	}

	// Removal flags the service; it goes with its last task.
	h.ok(Command{Kind: CmdRemoveService, Name: "web"})
	if svc := h.s.ServiceByName("web"); svc == nil || !svc.Remove {
		t.Fatalf("service must stay, flagged, while tasks run")
	}
	for _, x := range h.tasksIn("web") {
		if x.Status.State == StateRunning {
			h.ok(Command{Kind: CmdTaskStatus, Task: x.ID, Node: x.Node, State: StateShutdown})
		}
	}
	if h.s.ServiceByName("web") != nil || h.s.NumTasks() != 0 {
		t.Fatalf("service and tasks should be gone, %d tasks left", h.s.NumTasks())
	}
}

func TestTransitionRejections(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 2}})
	h.placeAll(2)
	ts := h.tasksIn("web")
	a, b := ts[0], ts[1]
	other := NodeID(3) - a.Node
	rs := h.apply(
		Command{Kind: CmdTaskStatus, Task: a.ID, Node: other, State: StateFailed},         // wrong node
		Command{Kind: CmdTaskStatus, Task: a.ID, Node: a.Node, State: StateAccepted},      // lower rank
		Command{Kind: CmdTaskStatus, Task: a.ID, Node: a.Node, State: StateOrphaned},      // not the agent's
		Command{Kind: CmdTaskStatus, Task: a.ID, Node: a.Node, State: StateRejected},      // rejected only before running
		Command{Kind: CmdTaskStatus, Task: b.ID, Node: b.Node, State: StateComplete},      // fine
		Command{Kind: CmdAssign, Task: a.ID, Node: a.Node},                                // not pending
		Command{Kind: CmdTaskStatus, Task: TaskID(999), Node: a.Node, State: StateFailed}, // unknown
	)
	want := []error{ErrWrongNode, ErrLowerRank, ErrWrongComponent, ErrWrongComponent, nil, ErrNotAllowed, ErrNotFound}
	for i, r := range rs {
		if err := r.Err(); !errors.Is(err, want[i]) || (want[i] == nil) != (err == nil) {
			t.Errorf("command %d: got %v, want %v", i, err, want[i])
		}
	}
	if b.Status.State != StateComplete {
		t.Errorf("the legal transition in the batch was not applied: %s", b.Status.State)
	}
	// A node that is down does not accept updates.
	h.ok(Command{Kind: CmdSetNodeStatus, Node: a.Node, NodeStatus: NodeDown})
	rs = h.apply(Command{Kind: CmdTaskStatus, Task: a.ID, Node: a.Node, State: StateFailed})
	if !errors.Is(rs[0].Err(), ErrNodeNotReady) {
		t.Fatalf("update from a down node: got %v", rs[0].Err())
	}
}

func TestReplayChangesNothing(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 2}})
	before := h.s.Hash()
	h.s.Apply([]Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "db", Replicas: 2}}}, h.index, h.now, &h.out)
	if h.s.Hash() != before || h.s.ServiceByName("db") != nil {
		t.Fatal("a replayed entry changed the state")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, Config{Group: 2, HistoryRetention: 3})
	h.addNodes(3)
	h.ok(Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.0.0.0/24"}})
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 4, Networks: []string{"net"}, Constraints: []string{"node.role==worker"}}},
		Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "agent", Mode: ModeGlobal}})
	h.placeAll(3)
	x := h.tasksIn("web")[1]
	h.ok(Command{Kind: CmdTaskStatus, Task: x.ID, Node: x.Node, State: StateFailed, Message: "boom", ExitCode: -1})
	var buf bytes.Buffer
	if err := h.s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	loaded := New(Config{})
	if err := loaded.Load(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if loaded.Hash() != h.s.Hash() {
		t.Fatal("hash differs after Save/Load")
	}
	if err := loaded.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The loaded state behaves the same as the original.
	cmd := []Command{{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown}}
	var o1, o2 Output
	h.s.Apply(cmd, h.index+1, h.now+1, &o1)
	loaded.Apply(cmd, h.index+1, h.now+1, &o2)
	if loaded.Hash() != h.s.Hash() {
		t.Fatal("original and loaded states diverged on the same entry")
	}
	// Corrupt and truncated snapshots fail cleanly.
	raw := buf.Bytes()
	for _, bad := range [][]byte{nil, raw[:len(raw)/2], append([]byte("x"), raw...)} {
		if err := New(Config{}).Load(bytes.NewReader(bad)); err == nil {
			t.Errorf("loading %d corrupt bytes succeeded", len(bad))
		}
	}
	canon := h.s.Canonical()
	for i := 0; i < len(canon); i += 7 {
		c := append([]byte(nil), canon...)
		c[i] ^= 0xff
		if st, err := FromCanonical(c); err == nil {
			_ = st.CheckInvariants() // must not panic; may still be a valid state
		}
		_, _ = FromCanonical(canon[:i])
	}
}

func TestBatchCodecRoundTrip(t *testing.T) {
	batch := []Command{
		{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3, Networks: []string{"a"}, Restart: RestartPolicy{Condition: RestartOnFailure, Delay: 5e9},
			Placement: PlacementPolicy{Preferences: []string{"node.labels.zone"}, MaxPerNode: 2, Strategy: StrategyBinPack}}},
		{Kind: CmdTaskStatus, Task: 1<<48 | 7, Node: 3, State: StateFailed, ExitCode: -9, Message: "oom"},
		{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 4, Name: "n4", Labels: map[string]string{"zone": "a", "disk": "ssd"}}},
		{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "a", Subnet: "10.0.0.0/16"}},
	}
	enc := AppendBatch(nil, batch)
	got, err := DecodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	if again := AppendBatch(nil, got); !bytes.Equal(again, enc) {
		t.Fatal("decode+encode is not the identity")
	}
	if pl := got[0].Spec.Placement; pl.MaxPerNode != 2 || pl.Strategy != StrategyBinPack || len(pl.Preferences) != 1 {
		t.Fatalf("placement policy %+v did not survive the codec", pl)
	}
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeBatch(enc[:i]); err == nil {
			t.Fatalf("truncated batch of %d bytes decoded", i)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, []Command{{Kind: CmdTaskStatus, Task: 1, Node: 1, State: StateRunning}}))
	f.Add(AppendBatch(nil, []Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "x", Replicas: 1}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := DecodeBatch(b)
		if err != nil {
			return
		}
		// Whatever decodes must apply without panicking or breaking invariants.
		s := New(Config{Group: 1})
		var out Output
		s.Apply(batch, 1, 1, &out)
		if len(out.Results) != len(batch) {
			t.Fatalf("%d results for %d commands", len(out.Results), len(batch))
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCloneIsDeepAndEqual(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.network("net", "10.0.0.0/24")
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3, Networks: []string{"net"}}},
		Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "mon", Mode: ModeGlobal}})
	h.placeAll(2)
	c := h.s.Clone()
	if c.Hash() != h.s.Hash() {
		t.Fatal("clone differs from the original")
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	before := h.s.Hash()
	var out Output
	c.Apply([]Command{{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDown}, {Kind: CmdRemoveService, Name: "web"}}, h.index+1, h.now+1, &out)
	if h.s.Hash() != before {
		t.Fatal("changing the clone changed the original")
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// CountTasksByState counts each task once, under its observed state, as a
// walk over every task does; states past the slice are left out.
func TestCountTasksByState(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(2)
	h.apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 5}})
	h.placeAll(2)
	h.apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "db", Replicas: 3}})
	want := make([]int, StateOrphaned+1)
	for _, id := range h.s.TaskIDs() {
		want[h.s.Task(id).Status.State]++
	}
	got := make([]int, StateOrphaned+1)
	h.s.CountTasksByState(got)
	if !slices.Equal(got, want) || want[StateNew]+want[StatePending] == 0 || want[StateRunning] == 0 {
		t.Fatalf("counts %v, want %v (with tasks both placed and not)", got, want)
	}
	short := make([]int, StateRunning)
	h.s.CountTasksByState(short)
	if !slices.Equal(short, want[:StateRunning]) {
		t.Fatalf("short counts %v, want %v", short, want[:StateRunning])
	}
}

// CountServiceTasks agrees, for every service, with a walk over its slots'
// task lists: by observed state, running at the current spec version and at
// any, and slots with a task not being stopped — through placement, a rolling
// update (tasks of two spec versions), a global service and a removal.
func TestCountServiceTasksAgreesWithItsSlots(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(3)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 5}})
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "mon", Mode: ModeGlobal}})
	h.placeAll(3)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "db", Replicas: 4}})
	h.ok(Command{Kind: CmdUpdateService, Spec: &ServiceSpec{Name: "web", Replicas: 5, Env: []string{"V=2"}, Update: UpdateConfig{Parallelism: 2}}})
	h.placeAll(3)
	h.ok(Command{Kind: CmdRemoveService, Name: "db"})
	checked := 0
	for _, id := range h.s.ServiceIDs() {
		svc := h.s.Service(id)
		var want ServiceCounts
		_, tasks := h.s.SlotTasks(id)
		for _, slot := range tasks {
			active := false
			for _, t := range slot {
				want.ByState[t.Status.State]++
				if t.Status.State == StateRunning && t.Desired == DesiredRunning && !NeedsReconnect(t) {
					want.RunningAny++
					if t.SpecVersion == svc.SpecVersion {
						want.Running++
					}
				}
				active = active || !t.Desired.Stopping()
			}
			if active {
				want.Active++
			}
		}
		if got := h.s.CountServiceTasks(id); got != want {
			t.Fatalf("service %q: counts %+v, want %+v", svc.Spec.Name, got, want)
		}
		checked++
	}
	web, mon := h.s.CountServiceTasks(h.s.ServiceByName("web").ID), h.s.CountServiceTasks(h.s.ServiceByName("mon").ID)
	if checked != 3 || web.Running >= web.ByState[StateRunning] || web.RunningAny <= web.Running || mon.Running != 3 || mon.Active != 3 {
		t.Fatalf("checked %d services, want 3 with web mid-update (%+v: tasks still running the old spec version) and mon running on 3 nodes (%+v)", checked, web, mon)
	}
}

// Property: TaskIDsAfter(after, limit, keep) is the first limit IDs of the
// ascending list of IDs above after whose tasks keep accepts — for every
// after (below, between and above the IDs), limit and filter tried.
func TestTaskIDsAfterIsAPageOfTheSortedIDs(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(3)
	for i := range 6 {
		h.apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("s%d", i), Replicas: uint32(3 + 4*i)}})
		if i%2 == 0 {
			h.placeAll(3)
		}
	}
	// Some tasks leave the store.
	for i, id := range h.s.TaskIDs() {
		if tk := h.s.tasks.get(id); tk.Status.State == StatePending && i%3 == 0 {
			h.s.deleteTask(tk, false)
		}
	}
	all := h.s.TaskIDs()
	// The store's order holds its own tasks, in the state and in a copy
	// of it.
	for name, st := range map[string]*State{"state": h.s, "clone": h.s.Clone()} {
		if errs := st.checkOrder(); len(errs) > 0 {
			t.Fatalf("%s: %v", name, errs)
		}
	}
	if !slices.Equal(h.s.TaskIDs(), all) {
		t.Fatalf("TaskIDs %v, want %v", h.s.TaskIDs(), all)
	}
	var ranged []TaskID
	for tk := range h.s.TasksInOrder() {
		if tk != h.s.Task(tk.ID) {
			t.Fatalf("TasksInOrder yielded a task %d that is not the store's", tk.ID)
		}
		ranged = append(ranged, tk.ID)
		if len(ranged) == len(all)-1 {
			break // a range ended early stops the walk
		}
	}
	if !slices.Equal(ranged, all[:len(all)-1]) {
		t.Fatalf("TasksInOrder yielded %v, want %v", ranged, all[:len(all)-1])
	}
	running := func(t *Task) bool { return t.Status.State == StateRunning }
	for _, keep := range []func(*Task) bool{nil, running} {
		var want []TaskID
		for _, id := range all {
			if keep == nil || keep(h.s.Task(id)) {
				want = append(want, id)
			}
		}
		afters := []TaskID{0, all[len(all)-1], all[len(all)-1] + 1}
		for i := 0; i < len(all); i += 5 {
			afters = append(afters, all[i])
		}
		for _, after := range afters {
			for _, limit := range []int{0, 1, 2, 7, len(all), len(all) + 3} {
				i, _ := slices.BinarySearch(want, after+1)
				ref := want[i:min(len(want), i+limit)]
				if got := h.s.TaskIDsAfter(after, limit, keep); !slices.Equal(got, ref) && (len(got) > 0 || len(ref) > 0) {
					t.Fatalf("after %d, limit %d, filtered %v: %v, want %v", after, limit, keep != nil, got, ref)
				}
			}
		}
	}
}
