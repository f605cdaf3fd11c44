package duty

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"shoal/sched"
	"shoal/statemachine"
)

// messages returns the status message of every pending task of a service,
// counted by message.
func messages(t testing.TB, e *Memory, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StatePending }) {
		if svcName(t, e, tk) == name {
			out[tk.Message()]++
		}
	}
	return out
}

func svcName(t testing.TB, e *Memory, tk *statemachine.Task) string {
	t.Helper()
	name := ""
	for g := 1; g <= e.Groups(); g++ {
		if err := e.ReadLocal(g, func(s *statemachine.State) {
			if svc := s.Service(tk.Service); svc != nil && s.Task(tk.ID) != nil {
				name = svc.Spec.Name
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

func indexes(e *Memory) []uint64 {
	var idx []uint64
	for g := 0; g <= e.Groups(); g++ {
		idx = append(idx, e.Index(g))
	}
	return idx
}

// A task that cannot be placed carries why, in the replicated state: which
// constraint matched no node, which resource was short on how many nodes.
// The reason is proposed once per change for a whole batch, never again
// while it holds, and a partial placement that leaves the reason as it was
// proposes nothing.
func TestPendingReasonsReplicated(t *testing.T) {
	clk := newFakeClock()
	e := newMem(t, 2, clk)
	mustSubmit(t, e, zoneNodes(4)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "big", Replicas: 3000,
		Constraints: []string{"node.labels.zone==c"}, CPU: 1000}))
	d := NewDriver(e, DriverConfig{Clock: clk, ReasonRefresh: 10 * time.Second})

	runOnce(t, d)
	want := "no suitable node: constraint node.labels.zone==c matches none of the 4 nodes"
	if got := messages(t, e, "big"); got[want] != 3000 || d.LastRun().Reasons != 1 {
		t.Fatalf("after the first run: messages %v, %d reason commands; want all 3000 to say %q in one command",
			got, d.LastRun().Reasons, want)
	}

	// The reason holds: the next run proposes nothing, the one after that
	// does not even scan.
	before := indexes(e)
	runOnce(t, d)
	if st := d.LastRun(); st.Skipped || st.Reasons != 0 || !slices.Equal(indexes(e), before) {
		t.Fatalf("an unchanged reason was proposed again: stats %+v, indexes %v -> %v", st, before, indexes(e))
	}
	runOnce(t, d)
	if !d.LastRun().Skipped {
		t.Fatalf("nothing changed, yet the run scanned: %+v", d.LastRun())
	}

	// The reason changes: a zone-c node joins with too little CPU.
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
		ID: 5, Name: "node-5", Labels: map[string]string{"zone": "c"}, CPU: 500, Memory: 8 << 30}})
	runOnce(t, d)
	want = "no suitable node: constraint node.labels.zone==c excluded 4 nodes, insufficient CPU on 1 node (a task reserves 1000 milli-cores)"
	if got := messages(t, e, "big"); got[want] != 3000 || d.LastRun().Reasons != 1 {
		t.Fatalf("after a zone-c node joined: messages %v, %d reason commands; want all to say %q",
			got, d.LastRun().Reasons, want)
	}

	// The node grows: four tasks fit and are assigned (their message goes),
	// the rest stay pending for the same reason, and nothing is proposed.
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
		ID: 5, Name: "node-5", Labels: map[string]string{"zone": "c"}, CPU: 4000, Memory: 8 << 30}})
	if placed := runOnce(t, d); placed != 4 || d.LastRun().Reasons != 0 {
		t.Fatalf("placed %d, %d reason commands; want 4 placed and the unchanged reason not proposed (%+v)",
			placed, d.LastRun().Reasons, d.LastRun())
	}
	if got := messages(t, e, "big"); got[want] != 2996 || len(got) != 1 {
		t.Fatalf("after a partial placement: %v", got)
	}
	for _, tk := range tasksWhere(t, e, func(tk *statemachine.Task) bool { return tk.Status.State == statemachine.StateAssigned }) {
		if tk.Message() != "" {
			t.Errorf("assigned task %d still says %q", tk.ID, tk.Message())
		}
	}

	// The reason changes again at once (a second short node joins): the
	// tasks keep the reason they carry until ReasonRefresh has passed since
	// the last change, so a reason that changes at every run cannot
	// rewrite the batch at every run; meanwhile the driver keeps scanning.
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{
		ID: 6, Name: "node-6", Labels: map[string]string{"zone": "c"}, CPU: 500, Memory: 8 << 30}})
	runOnce(t, d)
	runOnce(t, d)
	if got := messages(t, e, "big"); got[want] != 2996 || d.LastRun().Reasons != 0 || d.LastRun().Skipped {
		t.Fatalf("a second change within ReasonRefresh: %v, stats %+v; want the old reason kept and the run not skipped", got, d.LastRun())
	}
	clk.Advance(10 * time.Second)
	runOnce(t, d)
	want = "no suitable node: constraint node.labels.zone==c excluded 4 nodes, insufficient CPU on 2 nodes (a task reserves 1000 milli-cores)"
	if got := messages(t, e, "big"); got[want] != 2996 || d.LastRun().Reasons != 1 {
		t.Fatalf("after ReasonRefresh: %v, %d reason commands; want all to say %q", got, d.LastRun().Reasons, want)
	}

	// A few tasks join the batch (a scale-up): one command naming them,
	// at once (they carry no reason yet).
	spec := statemachine.ServiceSpec{Name: "big", Replicas: 3003, Constraints: []string{"node.labels.zone==c"}, CPU: 1000}
	mustSubmit(t, e, statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &spec})
	runOnce(t, d)
	if got := messages(t, e, "big"); got[want] != 2999 || d.LastRun().Reasons != 1 || d.LastRun().Skipped {
		t.Fatalf("after a scale-up: %v, %d reason commands", got, d.LastRun().Reasons)
	}
}

// Each task of a global service is bound to its node: it says what its
// node lacks; tasks with the same reason share one command.
func TestPendingReasonsGlobal(t *testing.T) {
	e := newMem(t, 1, nil)
	mustSubmit(t, e, zoneNodes(3)...)
	mustSubmit(t, e, createSpec(statemachine.ServiceSpec{Name: "agent", Mode: statemachine.ModeGlobal, Memory: 16 << 30}))
	d := NewDriver(e, DriverConfig{})
	runOnce(t, d)
	want := "its node cannot run it: task needs 16 GiB of memory, node has 8 GiB free of 8 GiB"
	if got := messages(t, e, "agent"); got[want] != 3 || d.LastRun().Reasons != 1 {
		t.Fatalf("messages %v, %d reason commands; want 3 tasks saying %q in one command", got, d.LastRun().Reasons, want)
	}
	runOnce(t, d)
	if d.LastRun().Reasons != 0 {
		t.Fatalf("an unchanged reason was proposed again: %+v", d.LastRun())
	}
}

// The reason commands name the tasks whose message is out of date when
// they are few, and cover the whole batch when they are many.
func TestReasonCommands(t *testing.T) {
	err := &sched.UnplacedError{Why: sched.Explanation{Nodes: 1, Paused: 1}}
	msg := pendingMessage(err)
	if msg != "no suitable node: 1 node paused" {
		t.Fatalf("message %q", msg)
	}
	mk := func(n, stale int) *batch {
		b := &batch{batchKey: batchKey{group: 1, service: 1, version: 2}, name: "web"}
		for i := range n {
			b.tasks = append(b.tasks, statemachine.TaskID(i+1))
			m := msg
			if i >= n-stale {
				m = "an older reason"
			}
			b.msgs = append(b.msgs, m)
		}
		return b
	}
	for _, tc := range []struct {
		n, stale, placed int
		want             []statemachine.TaskID // nil: the whole batch; one command unless none
		none             bool
	}{
		{n: 1000, stale: 0, none: true},
		{n: 1000, stale: 3, want: []statemachine.TaskID{998, 999, 1000}},
		{n: 1000, stale: 3, placed: 999, want: []statemachine.TaskID{1000}},
		{n: 1000, stale: 3, placed: 1000, none: true},
		{n: 1000, stale: maxListedTasks + 1},
	} {
		b := mk(tc.n, tc.stale)
		p := plan{why: map[batchKey]error{b.batchKey: err}, placed: map[batchKey]int{b.batchKey: tc.placed}}
		cmds, held := p.reasonCommands([]*batch{b}, func(batchKey) bool { return true })
		if held {
			t.Errorf("held with refresh allowed")
		}
		name := fmt.Sprintf("%d tasks, %d stale, %d placed", tc.n, tc.stale, tc.placed)
		if tc.none {
			if len(cmds) != 0 {
				t.Errorf("%s: %d commands, want none", name, len(cmds))
			}
			continue
		}
		if len(cmds) != 1 {
			t.Fatalf("%s: %d commands, want 1", name, len(cmds))
		}
		c := cmds[0]
		if c.Kind != statemachine.CmdPendingReason || c.Name != "web" || c.Seq != 2 || c.Message != msg || !slices.Equal(c.Tasks, tc.want) {
			t.Errorf("%s: %+v, want tasks %v", name, c, tc.want)
		}
	}
}

// Outdated reasons wait for refresh; tasks with none get theirs anyway.
func TestReasonCommandsHeld(t *testing.T) {
	err := &sched.UnplacedError{Why: sched.Explanation{Nodes: 1, Paused: 1}}
	b := &batch{batchKey: batchKey{group: 1, service: 1, version: 1}, name: "web",
		tasks: []statemachine.TaskID{1, 2, 3}, msgs: []string{"older", "", pendingMessage(err)}}
	p := plan{why: map[batchKey]error{b.batchKey: err}, placed: map[batchKey]int{}}
	asked := 0
	cmds, held := p.reasonCommands([]*batch{b}, func(batchKey) bool { asked++; return false })
	if !held || asked != 1 || len(cmds) != 1 || !slices.Equal(cmds[0].Tasks, []statemachine.TaskID{2}) {
		t.Fatalf("held=%v asked=%d cmds=%+v; want task 2 only, held", held, asked, cmds)
	}
	b.msgs[0] = pendingMessage(err)
	if _, held := p.reasonCommands([]*batch{b}, func(batchKey) bool { asked++; return false }); held || asked != 1 {
		t.Fatalf("nothing outdated: held=%v, refresh asked %d times", held, asked)
	}
}
