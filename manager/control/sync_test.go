package control

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"shoal/engine/duty"
	"shoal/internal/clock"
	sm "shoal/statemachine"
	"shoal/wire"
)

// replicas is a cluster seen from one manager replica: lead is the groups
// as committed, local this replica's copy, which may lag. A commit (as the
// engine's SubmitToGroup) returns once this replica applied it, so the
// group is caught up from then on; a linearizable read answers from the
// committed state. Every call is recorded as group:kind.
type replicas struct {
	lead, local *duty.Memory
	mu          sync.Mutex
	caughtUp    map[int]bool
	calls       []string
}

var _ Groups = (*replicas)(nil)

func (r *replicas) record(g int, kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("g%d:%s", g, kind))
}

func (r *replicas) Groups() int { return r.lead.Groups() }

func (r *replicas) ReadLocal(g int, fn func(*sm.State)) error {
	r.record(g, "local")
	r.mu.Lock()
	m := r.local
	if r.caughtUp[g] {
		m = r.lead
	}
	r.mu.Unlock()
	return m.ReadLocal(g, fn)
}

func (r *replicas) Read(ctx context.Context, g int, fn func(*sm.State)) error {
	r.record(g, "quorum")
	return r.lead.Read(ctx, g, fn)
}

func (r *replicas) SubmitToGroup(ctx context.Context, g int, cmd sm.Command) (sm.Result, error) {
	r.record(g, "commit")
	res, err := r.lead.SubmitToGroup(ctx, g, cmd)
	r.mu.Lock()
	r.caughtUp[g] = true
	r.mu.Unlock()
	return res, err
}

func (r *replicas) takeCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func submit(t *testing.T, ms []*duty.Memory, cmds ...sm.Command) {
	t.Helper()
	for _, m := range ms {
		for i, o := range m.SubmitMany(context.Background(), cmds) {
			if err := o.Err(); err != nil {
				t.Fatalf("%s: %v", cmds[i].Kind, err)
			}
		}
	}
}

// redrive runs the outbox duty once on each cluster (address blocks
// between the groups).
func redrive(t *testing.T, ms ...*duty.Memory) {
	t.Helper()
	for _, m := range ms {
		if err := duty.NewOutboxDuty(m, duty.OutboxConfig{}).RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// world is one node n1 running web.1 (task t1, address on net), on a
// lead and an identical local replica.
type world struct {
	*replicas
	group int
	t1    sm.TaskID
}

func newWorld(t *testing.T) *world {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	r := &replicas{lead: duty.NewMemory(2, clk), local: duty.NewMemory(2, clk), caughtUp: map[int]bool{}}
	both := []*duty.Memory{r.lead, r.local}
	submit(t, both,
		sm.Command{Kind: sm.CmdUpsertNode, NodeSpec: &sm.Node{ID: 1, Name: "n1", Role: sm.RoleWorker}},
		sm.Command{Kind: sm.CmdCreateNetwork, NetworkSpec: &sm.Network{ID: 1, Name: "net", Subnet: "10.0.0.0/29"}})
	submit(t, both, sm.Command{Kind: sm.CmdCreateService, Spec: &sm.ServiceSpec{Name: "web", Replicas: 1, Networks: []string{"net"}}})
	redrive(t, both...) // the service's group leases an address block
	w := &world{replicas: r}
	w.t1 = w.newest(r.lead)
	w.group = int(uint64(w.t1) >> 48)
	submit(t, both, sm.Command{Kind: sm.CmdAssign, Task: w.t1, Node: 1},
		sm.Command{Kind: sm.CmdTaskStatus, Task: w.t1, Node: 1, State: sm.StateRunning})
	return w
}

// newest returns the highest task ID of any group.
func (w *world) newest(m *duty.Memory) sm.TaskID {
	var last sm.TaskID
	for g := 1; g <= m.Groups(); g++ {
		_ = m.ReadLocal(g, func(s *sm.State) {
			if ids := s.TaskIDs(); len(ids) > 0 {
				last = max(last, ids[len(ids)-1])
			}
		})
	}
	return last
}

func (w *world) seq(m *duty.Memory) uint64 {
	var seq uint64
	_ = m.ReadLocal(w.group, func(s *sm.State) { seq = s.Node(1).AssignSeq })
	return seq
}

// lagBehind has the lead (only) restart web.1 as t2 after t1 failed:
// the local replica knows neither t1's failure nor t2.
func (w *world) lagBehind(t *testing.T) sm.TaskID {
	t.Helper()
	submit(t, []*duty.Memory{w.lead}, sm.Command{Kind: sm.CmdTaskStatus, Task: w.t1, Node: 1, State: sm.StateFailed, ExitCode: 1})
	redrive(t, w.lead)
	t2 := w.newest(w.lead)
	if t2 == w.t1 {
		t.Fatal("no replacement task was created")
	}
	submit(t, []*duty.Memory{w.lead}, sm.Command{Kind: sm.CmdAssign, Task: t2, Node: 1})
	return t2
}

func (w *world) sync(t *testing.T, node sm.NodeID, seq uint64, held ...sm.TaskID) []sm.TaskID {
	t.Helper()
	seqs := make([]uint64, w.Groups()+1)
	seqs[w.group] = seq
	destroy, err := Sync(context.Background(), w, &wire.SyncRequest{NodeID: node, Seqs: seqs, Held: held})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return destroy
}

func wantCalls(t *testing.T, w *world, want ...string) {
	t.Helper()
	if got := w.takeCalls(); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

func TestSyncUnknownHandlesDestroyed(t *testing.T) {
	w := newWorld(t)
	other := 3 - w.group
	unknown := []sm.TaskID{handle(0, 5), handle(7, 1), handle(other, 99), handle(w.group, 99)}
	destroy := w.sync(t, 1, 0, append([]sm.TaskID{w.t1}, unknown...)...)
	slices.Sort(destroy)
	want := slices.Sorted(slices.Values(unknown))
	if !slices.Equal(destroy, want) {
		t.Errorf("destroy %v, want the handles the manager does not know %v (and not %v)", destroy, want, w.t1)
	}
}

// TestSyncLocalAnswerNeedsNoCommit: a replica that applied the agent's
// sequence, with nothing to confirm, answers alone.
func TestSyncLocalAnswerNeedsNoCommit(t *testing.T) {
	w := newWorld(t)
	before := w.lead.Index(w.group)
	if d := w.sync(t, 1, w.seq(w.local), w.t1); len(d) != 0 {
		t.Errorf("destroy %v, want nothing", d)
	}
	wantCalls(t, w, fmt.Sprintf("g%d:local", w.group))
	if after := w.lead.Index(w.group); after != before {
		t.Errorf("the group's index moved from %d to %d: a local answer committed something", before, after)
	}
}

// TestSyncLaggingReplicaCommitsFirst: the agent saw t2 (its sequence is
// past what this replica applied); the answer must not come from the
// stale state, which would have the agent destroy t2.
func TestSyncLaggingReplicaCommitsFirst(t *testing.T) {
	w := newWorld(t)
	t2 := w.lagBehind(t)
	if d := w.sync(t, 1, w.seq(w.lead), t2); len(d) != 0 {
		t.Errorf("destroy %v: the agent is told to destroy the task it was just assigned", d)
	}
	g := w.group
	wantCalls(t, w, fmt.Sprintf("g%d:local", g), fmt.Sprintf("g%d:commit", g), fmt.Sprintf("g%d:local", g))
}

// TestSyncWithoutSequenceReadsQuorum: a held handle in a group where the
// agent reports no sequence is answered from a linearizable read, never
// from a replica that may lag.
func TestSyncWithoutSequenceReadsQuorum(t *testing.T) {
	w := newWorld(t)
	t2 := w.lagBehind(t)
	if d := w.sync(t, 1, 0, t2); len(d) != 0 {
		t.Errorf("destroy %v: a lagging replica answered for a task it does not know", d)
	}
	wantCalls(t, w, fmt.Sprintf("g%d:quorum", w.group))
}

// TestSyncRefusedReadsQuorum: the error classes by which a group refuses
// a sync (a node it does not know, a sequence past the newest) are
// answered from a linearizable read; other errors fail the sync.
func TestSyncRefusedReadsQuorum(t *testing.T) {
	w := newWorld(t)
	t2 := w.lagBehind(t)
	g := w.group
	// n2 does not exist: the commit says not found; t2 is n1's, so n2
	// destroys it.
	if d := w.sync(t, 2, 1, t2); !slices.Equal(d, []sm.TaskID{t2}) {
		t.Errorf("n2: destroy %v, want [%v]", d, t2)
	}
	wantCalls(t, w, fmt.Sprintf("g%d:local", g), fmt.Sprintf("g%d:commit", g), fmt.Sprintf("g%d:quorum", g))
	// A sequence past the newest: invalid; the answer still comes.
	w.caughtUp = map[int]bool{}
	if d := w.sync(t, 1, w.seq(w.lead)+1, t2); len(d) != 0 {
		t.Errorf("seq past the newest: destroy %v, want nothing", d)
	}
	wantCalls(t, w, fmt.Sprintf("g%d:local", g), fmt.Sprintf("g%d:commit", g), fmt.Sprintf("g%d:quorum", g))
	// Any other error of a commit fails the sync.
	w.lead.FailSubmissions(func(sm.Command) error { return sm.ErrNodeNotReady })
	seqs := make([]uint64, w.Groups()+1)
	seqs[g] = w.seq(w.lead)
	if _, err := Sync(context.Background(), w, &wire.SyncRequest{NodeID: 1, Seqs: seqs, Held: []sm.TaskID{t2}}); err == nil {
		t.Error("a commit that failed for another reason gave an answer")
	}
}

// TestSyncFencedBySequence: a sync collected before t1's address was
// released (an older sequence) frees nothing, though it does not list
// t1, and leaves t2's address alone; at the release's sequence the
// address is freed and t2 keeps its own. Both need a commit: an address
// is in quarantine on the node.
func TestSyncFencedBySequence(t *testing.T) {
	w := newWorld(t)
	seq1 := w.seq(w.lead)
	t2 := w.lagBehind(t)
	addrs := func() (q, held int) {
		_ = w.lead.ReadLocal(w.group, func(s *sm.State) {
			for _, id := range []sm.TaskID{w.t1, t2} {
				for _, a := range s.Task(id).Attachments {
					if a.Released {
						continue
					}
					if id == w.t1 {
						q++
					} else {
						held++
					}
				}
			}
		})
		return
	}
	if q, h := addrs(); q != 1 || h != 1 {
		t.Fatalf("before: t1 has %d unreleased addresses, t2 %d; want 1 and 1", q, h)
	}
	w.caughtUp[w.group] = true // this replica applied everything
	if d := w.sync(t, 1, seq1); len(d) != 0 {
		t.Errorf("older sequence: destroy %v, want nothing", d)
	}
	g := w.group
	wantCalls(t, w, fmt.Sprintf("g%d:local", g), fmt.Sprintf("g%d:commit", g), fmt.Sprintf("g%d:local", g))
	if q, h := addrs(); q != 1 || h != 1 {
		t.Errorf("a sync at sequence %d (before the release) freed an address: t1 has %d, t2 %d", seq1, q, h)
	}
	if d := w.sync(t, 1, seq1+1); len(d) != 0 {
		t.Errorf("release's sequence: destroy %v, want nothing", d)
	}
	if q, h := addrs(); q != 0 || h != 1 {
		t.Errorf("a sync at the release's sequence: t1 has %d unreleased addresses (want 0), t2 %d (want 1)", q, h)
	}
}
