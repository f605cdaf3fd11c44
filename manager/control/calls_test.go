package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/route"
	sm "shoal/statemachine"
	"shoal/wire"
)

// callsWorld is a replica's state as agents poll it in a ramp: nodes
// nodes, each given perNode tasks of four services (on two networks, so
// every task has two addresses) in batches of batch tasks per node, one
// entry per group per batch (nextBatch).
type callsWorld struct {
	tb     testing.TB
	m      *duty.Memory
	feed   *Feed
	stream *Stream
	nodes  int
	batch  int
}

func newCallsWorld(tb testing.TB, groups, nodes, perNode, batch, journal int) *callsWorld {
	return newCallsWorldOf(tb, []string{"web", "api", "cache", "db"}, groups, nodes, perNode, batch, journal)
}

// newCallsWorldOf is newCallsWorld with the services named.
func newCallsWorldOf(tb testing.TB, names []string, groups, nodes, perNode, batch, journal int) *callsWorld {
	tb.Helper()
	ctx := context.Background()
	m := duty.NewMemory(groups, clock.NewFake(time.Unix(1_700_000_000, 0)))
	feed := NewFeed(groups, nil, 1<<16, journal)
	m.OnApply(feed.OnApply)
	w := &callsWorld{tb: tb, m: m, feed: feed, nodes: nodes, batch: batch,
		stream: newStream(streamConfig{Reads: m, Leaders: seat{leader: 1}, Feed: feed, Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})}
	for n := 1; n <= nodes; n++ {
		w.submit(sm.Command{Kind: sm.CmdUpsertNode, NodeSpec: &sm.Node{ID: sm.NodeID(n), Name: "n" + itoa(n),
			Status: sm.NodeReady, CPU: 1 << 30, Memory: 1 << 50}})
	}
	w.submit(sm.Command{Kind: sm.CmdCreateNetwork, NetworkSpec: &sm.Network{ID: 1, Name: "front", Subnet: "10.1.0.0/16"}})
	w.submit(sm.Command{Kind: sm.CmdCreateNetwork, NetworkSpec: &sm.Network{ID: 2, Name: "back", Subnet: "10.2.0.0/16"}})
	for _, name := range names {
		w.submit(sm.Command{Kind: sm.CmdCreateService, Spec: &sm.ServiceSpec{Name: name, Replicas: uint32(nodes * perNode / len(names)),
			Networks: []string{"front", "back"}, Command: []string{"/bin/" + name, "--port", "8080"},
			Env: []string{"MODE=prod", "NAME=" + name}, Dir: "/srv"}})
	}
	if err := duty.NewOutboxDuty(m, duty.OutboxConfig{}).RunOnce(ctx); err != nil { // address blocks leased
		tb.Fatal(err)
	}
	return w
}

func (w *callsWorld) submit(cmds ...sm.Command) {
	w.tb.Helper()
	for i, o := range w.m.SubmitMany(context.Background(), cmds) {
		if err := o.Err(); err != nil {
			w.tb.Fatalf("%s: %v", cmds[i].Kind, err)
		}
	}
}

// nextBatch assigns the next batch of tasks to every node (false: none
// are left).
func (w *callsWorld) nextBatch() bool {
	var pending []sm.TaskID
	for g := 1; g <= w.m.Groups(); g++ {
		_ = w.m.ReadLocal(g, func(st *sm.State) {
			for _, id := range st.TaskIDs() {
				if st.Task(id).Status.State == sm.StatePending {
					pending = append(pending, id)
				}
			}
		})
	}
	if len(pending) < w.nodes*w.batch {
		return false
	}
	slices.Sort(pending)
	var cmds []sm.Command
	for n := 1; n <= w.nodes; n++ {
		for range w.batch {
			cmds = append(cmds, sm.Command{Kind: sm.CmdAssign, Task: pending[0], Node: sm.NodeID(n)})
			pending = pending[1:]
		}
	}
	w.submit(cmds...)
	return true
}

// cursor is where an agent stands that saw everything applied so far.
func (w *callsWorld) cursor() wire.Cursor { return wire.Cursor(w.feed.Applied()) }

// poll asks the stream as node's session (one session per node) from
// cursor, without waiting.
func (w *callsWorld) poll(tb testing.TB, node int, cursor wire.Cursor) *wire.Assignments {
	a, err := w.stream.Assignments(context.Background(), &wire.AssignmentsRequest{SessionID: uint64(node)<<1 | 1,
		NodeID: sm.NodeID(node), Cursor: cursor})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkAssignmentsIncremental is the ramp's common poll: a
// session's next poll, from the cursor its last answer gave it (the
// specs it needs already sent), answered with the 10 tasks its node was
// given since (two addresses each; 100 per node in all, 50 nodes, four
// service groups).
func BenchmarkAssignmentsIncremental(b *testing.B) {
	benchIncremental(b, false, 4, 10)
}

// BenchmarkAssignmentsRampPoll is a 1M/10k ramp's poll: the cluster's
// default eight service groups, one task new on the node since its last
// answer (the node is given 100 in all), so what every poll costs
// whatever it carries dominates. The tasks are of 100 services, so, as
// in that ramp, most polls carry a spec the session was not sent yet.
func BenchmarkAssignmentsRampPoll(b *testing.B) {
	benchIncremental(b, false, 8, 1)
}

// BenchmarkAssignmentsIncrementalResent is that poll from a cursor the
// session's last answer did not give (that answer was lost): the specs
// are sent again.
func BenchmarkAssignmentsIncrementalResent(b *testing.B) {
	benchIncremental(b, true, 4, 10)
}

func benchIncremental(b *testing.B, lost bool, groups, batch int) {
	names := []string{"web", "api", "cache", "db"}
	if batch == 1 {
		names = names[:0]
		for i := range 100 {
			names = append(names, "svc-"+itoa(i))
		}
	}
	b.ReportAllocs()
	tasks, specs := 0, 0
	var w *callsWorld
	var cpu time.Duration
	cursors := map[int]wire.Cursor{}
	node := 0
	for range b.N {
		if node == 0 {
			b.StopTimer()
			if w == nil || !w.nextBatch() {
				w = newCallsWorldOf(b, names, groups, 50, 100, batch, 512)
				for n := 1; n <= w.nodes; n++ {
					cursors[n] = w.poll(b, n, nil).ResultsIn
				}
				w.nextBatch()
			}
			b.StartTimer()
		}
		n := node + 1
		node = (node + 1) % w.nodes
		if lost {
			w.stream.sessions.get(uint64(n)<<1|1, sm.NodeID(n)).given = nil
		}
		c0 := cpuTime()
		a := w.poll(b, n, cursors[n])
		cursors[n] = append(cursors[n][:0], a.ResultsIn...)
		tasks += len(a.Tasks)
		specs += len(a.Specs)
		w.stream.Release(a) // as the API does once the answer is written
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(tasks)/float64(b.N), "tasks/op")
	b.ReportMetric(float64(specs)/float64(b.N), "specs/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time this process used so far (user and system):
// on a shared machine a benchmark's wall time says little.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAssignmentsComplete: an agent's first poll, answered with
// its node's 100 tasks.
func BenchmarkAssignmentsComplete(b *testing.B) {
	w := newCallsWorld(b, 4, 50, 100, 10, 512)
	for w.nextBatch() {
	}
	b.ReportAllocs()
	b.ResetTimer()
	tasks := 0
	c0 := cpuTime()
	for i := range b.N {
		a := w.poll(b, 1+i%w.nodes, nil)
		tasks += len(a.Tasks)
	}
	b.ReportMetric(float64(tasks)/float64(b.N), "tasks/op")
	b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// okSubmitter accepts every command, each read as the engine reads it
// (encoded once, checked, into a buffer), whether handed as commands or
// as a node's reports (StatusSubmitter, as duty.Submitter takes them).
type okSubmitter struct{}

func (okSubmitter) SubmitMany(_ context.Context, cmds []sm.Command) []route.Outcome {
	var buf [256]byte
	for i := range cmds {
		_, _ = sm.AppendChecked(buf[:0], &cmds[i])
	}
	return make([]route.Outcome, len(cmds))
}

func (okSubmitter) SubmitStatuses(_ context.Context, node sm.NodeID, n int,
	at func(i int) (sm.TaskID, sm.TaskState, int32, string)) []route.Outcome {
	var buf [256]byte
	var c sm.Command
	cmd := func(i int) *sm.Command { // the engine's reader
		task, state, exit, msg := at(i)
		c = sm.Command{Kind: sm.CmdTaskStatus, Task: task, Node: node, State: state, ExitCode: exit, Message: msg}
		return &c
	}
	for i := range n {
		_, _ = sm.AppendChecked(buf[:0], cmd(i))
	}
	return make([]route.Outcome, n)
}

// BenchmarkStatusBatch: what the agent protocol itself costs a status
// batch of 10 reports (the commands made and encoded, the
// acknowledgement), with a submitter that commits nothing.
func BenchmarkStatusBatch(b *testing.B) {
	batch := &wire.StatusBatch{NodeID: 7}
	for i := range 10 {
		batch.Reports = append(batch.Reports, wire.StatusReport{Task: sm.TaskID(1<<48 | i), State: sm.StateRunning})
	}
	b.ReportAllocs()
	c0 := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	for range b.N {
		if _, err := SubmitStatus(context.Background(), okSubmitter{}, nil, batch); err != nil {
			b.Fatal(err)
		}
	}
}

var rewriteCalls = flag.Bool("calls-rewrite", false, "rewrite golden/assign-frames.txt from this build's answers")

// The frames a node is handed stay byte for byte what they were when
// golden/assign-frames.txt was written (rewrite it with -calls-rewrite
// only for a change meant to alter them): a random ramp of assignments,
// reports, failures (the node's own report: an echo), a scale-down, a
// spec update and a removal, with polls from the cursor the last answer
// gave, from one before it (a lost answer: specs resent), without one
// (COMPLETE) and from one the journal no longer reaches (a resync).
func TestAssignmentFramesUnchanged(t *testing.T) {
	w := newCallsWorld(t, 4, 6, 40, 5, 16)
	rng := rand.New(rand.NewPCG(35, 1))
	cursors := map[int][]wire.Cursor{} // per node: every cursor an answer gave
	var out bytes.Buffer
	removed := map[string]bool{}
	poll := func(step, n int, cursor wire.Cursor, how string) {
		a := w.poll(t, n, cursor)
		if len(a.ResultsIn) > 0 {
			cursors[n] = append(cursors[n], slices.Clone(a.ResultsIn))
		}
		enc, err := wire.Append(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%d node %d %s: %s resync=%v tasks=%d removed=%d specs=%d seqs=%v %x\n", step, n, how, a.Kind,
			a.Resync, len(a.Tasks), len(a.Removed), len(a.Specs), a.Seqs, sha256.Sum256(enc))
		// Handed back as the API does once it wrote the answer: the
		// next frames reuse its room, and must not carry any of it.
		w.stream.Release(a)
	}
	tasksOn := func(n int, state sm.TaskState) []sm.TaskID {
		var ids []sm.TaskID
		for g := 1; g <= 4; g++ {
			_ = w.m.ReadLocal(g, func(st *sm.State) {
				for _, tk := range st.NodeTasks(sm.NodeID(n)) {
					if tk.Status.State == state && tk.Desired == sm.DesiredRunning {
						ids = append(ids, tk.ID)
					}
				}
			})
		}
		slices.Sort(ids)
		return ids
	}
	for n := 1; n <= w.nodes; n++ {
		poll(0, n, nil, "first")
	}
	for step := 1; step <= 60; step++ {
		switch rng.IntN(8) {
		case 0, 1:
			w.nextBatch()
		case 2, 3: // a node reports some of its tasks running
			n := 1 + rng.IntN(w.nodes)
			for _, id := range tasksOn(n, sm.StateAssigned) {
				if rng.IntN(2) == 0 {
					w.submit(sm.Command{Kind: sm.CmdTaskStatus, Task: id, Node: sm.NodeID(n), State: sm.StateRunning})
				}
			}
		case 4: // one fails
			n := 1 + rng.IntN(w.nodes)
			if ids := tasksOn(n, sm.StateRunning); len(ids) > 0 {
				w.submit(sm.Command{Kind: sm.CmdTaskStatus, Task: ids[rng.IntN(len(ids))], Node: sm.NodeID(n), State: sm.StateFailed, ExitCode: 1})
			}
		case 5: // a service scales down, is updated, or goes
			name := []string{"web", "api", "cache", "db"}[rng.IntN(4)]
			var spec *sm.ServiceSpec
			_ = w.m.ReadLocal(route.ServiceGroup(name, 4), func(st *sm.State) {
				if svc := st.ServiceByName(name); svc != nil {
					c := svc.Spec
					spec = &c
				}
			})
			switch {
			case spec == nil || removed[name]:
			case rng.IntN(3) == 0:
				removed[name] = true
				w.submit(sm.Command{Kind: sm.CmdRemoveService, Name: name})
			case rng.IntN(2) == 0:
				spec.Replicas = spec.Replicas * 3 / 4
				w.submit(sm.Command{Kind: sm.CmdUpdateService, Spec: spec})
			default:
				spec.Env = append(slices.Clone(spec.Env), fmt.Sprintf("STEP=%d", step))
				w.submit(sm.Command{Kind: sm.CmdUpdateService, Spec: spec})
			}
		}
		for range 1 + rng.IntN(4) {
			n := 1 + rng.IntN(w.nodes)
			cs := cursors[n]
			switch r := rng.IntN(10); {
			case r == 0:
				poll(step, n, nil, "complete")
			case r == 1 && len(cs) > 1:
				poll(step, n, cs[len(cs)-2], "lost")
			case r == 2:
				poll(step, n, cs[0], "oldest")
			default:
				poll(step, n, cs[len(cs)-1], "next")
			}
		}
	}
	path := filepath.Join("golden", "assign-frames.txt")
	if *rewriteCalls {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(out.String(), "\n")
	for i, line := range strings.Split(string(want), "\n") {
		if i >= len(got) || got[i] != line {
			t.Fatalf("frame %d differs from the recorded one:\n got %s\nwant %s", i, lineAt(got, i), line)
		}
	}
	if len(got) != len(strings.Split(string(want), "\n")) {
		t.Fatalf("%d frames; %s recorded %d", len(got), path, len(strings.Split(string(want), "\n")))
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}

// seenBefore agrees with a map of the tasks of the earlier changes that
// are not echoes, for short lists (searched) and long ones (looked up).
func TestSeenBeforeMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 2))
	seen := map[sm.TaskID]bool{}
	for _, n := range []int{0, 1, 5, 32, 33, 200} {
		for range 20 {
			es := make([]jentry, n)
			for i := range es {
				es[i], _ = makeJentry(1, uint64(i+1), sm.TaskID(rng.IntN(n/3+1)), rng.IntN(4) == 0)
			}
			want := map[sm.TaskID]bool{}
			clear(seen)
			for i, e := range es {
				if e.echo() {
					continue
				}
				if got := seenBefore(es, i, seen); got != want[e.task] {
					t.Fatalf("%d changes, change %d (task %d): seen before %v, want %v", n, i, e.task, got, want[e.task])
				}
				want[e.task] = true
			}
		}
	}
}
