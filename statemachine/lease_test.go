package statemachine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"shoal/ipam"
)

// leaseWorld is a cluster group and two service groups wired by hand: the
// test plays the engine's routing and the outbox duty (deliver, release,
// return, request, acknowledge) as plain entries.
type leaseWorld struct {
	st  [3]*State
	idx [3]uint64
	now int64
	out Output
}

func newLeaseWorld() *leaseWorld {
	w := &leaseWorld{now: 1e9}
	for g := range w.st {
		w.st[g] = New(Config{Group: uint16(g), Groups: 2})
	}
	return w
}

// apply applies batch as group g's next entry and returns its results.
func (w *leaseWorld) apply(g int, batch ...Command) []Result {
	w.idx[g]++
	w.st[g].Apply(batch, w.idx[g], w.now, &w.out)
	return append([]Result(nil), w.out.Results...)
}

// steps lists the entries one re-drive makes from w's states, as (group,
// batch) pairs, so another world can replay them.
type step struct {
	g     int
	batch []Command
}

func (w *leaseWorld) redrive(run func(step)) {
	for range 3 {
		for g := 1; g <= 2; g++ {
			applied, _ := w.st[g].OutboxApplied()
			var ds []Command
			for _, e := range w.st[0].Outbox(applied) {
				ds = append(ds, Command{Kind: CmdDeliver, Group: uint16(g), Entry: &e})
			}
			if len(ds) > 0 {
				run(step{g, ds})
			}
			if w.st[g].Returnable() {
				run(step{g, []Command{{Kind: CmdReleaseBlocks}}})
			}
		}
		before := w.st[0].OutboxNext()
		var cmds []Command
		for g := 1; g <= 2; g++ {
			applied, _ := w.st[g].OutboxApplied()
			for id, bs := range w.st[g].Returning() {
				cmds = append(cmds, Command{Kind: CmdReturnBlocks, Group: uint16(g), Network: id, Blocks: bs, Seq: applied})
			}
			for _, want := range w.st[g].BlockWants() {
				cmds = append(cmds, Command{Kind: CmdRequestBlocks, Group: uint16(g), Network: want.Network, Count: want.Count, Seq: applied})
			}
			cmds = append(cmds, Command{Kind: CmdOutboxAck, Group: uint16(g), Seq: applied})
		}
		run(step{0, cmds})
		if w.st[0].OutboxNext() == before {
			return
		}
	}
}

// A state restored from a snapshot behaves exactly as the live one it was
// taken from, in every group, through leases, returns and deliveries.
func TestLoadedLeaseStateBehavesLikeLive(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		live := newLeaseWorld()
		var restored *leaseWorld
		run := func(s step) {
			live.apply(s.g, s.batch...)
			if restored != nil {
				restored.now = live.now
				restored.apply(s.g, s.batch...)
			}
		}
		for _, c := range []Command{
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 1, Name: "n1"}},
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 2, Name: "n2"}},
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 3, Name: "n3"}},
			{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/28"}},
		} {
			run(step{0, []Command{c}})
		}
		live.redrive(run)
		for i := 0; i < 300; i++ {
			live.now += int64(rng.IntN(15)) * 1e9
			g := 1 + rng.IntN(2)
			c := randomCommand(rng, live.st[g])
			switch {
			case OutboxKind(c.Kind):
				run(step{0, []Command{c}})
				live.redrive(run)
			case rng.IntN(4) == 0:
				live.redrive(run)
			default:
				run(step{g, []Command{c}})
			}
			if restored == nil && rng.IntN(30) == 0 {
				restored = &leaseWorld{idx: live.idx, now: live.now}
				for g, s := range live.st {
					var buf bytes.Buffer
					if err := s.Save(&buf); err != nil {
						t.Fatal(err)
					}
					restored.st[g] = New(Config{})
					if err := restored.st[g].Load(&buf); err != nil {
						t.Fatal(err)
					}
				}
			}
			for g, s := range live.st {
				if err := s.CheckInvariants(); err != nil {
					t.Fatalf("seed %d step %d group %d: %v", seed, i, g, err)
				}
				if restored != nil && restored.st[g].Hash() != s.Hash() {
					t.Fatalf("seed %d step %d: restored group %d diverged from the live one after %s", seed, i, g, c.Kind)
				}
			}
		}
	}
}

// With two service groups a network's blocks are single addresses: a /28
// of 13 usable addresses is lent out address by address on demand, and the
// group that asks for more than is left is told the network is full.
func TestGrantThenRefuseWhenFull(t *testing.T) {
	w := newLeaseWorld()
	run := func(s step) { w.apply(s.g, s.batch...) }
	run(step{0, []Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/28"}}}})
	w.redrive(run)
	if bs := w.st[0].Pool(1).BlockSize(); bs != 1 {
		t.Fatalf("block size %d with two groups on a /28, want 1", bs)
	}
	// web is in group 1 (its replicas and VIP need 14 > 13 addresses).
	run(step{1, []Command{{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 13, Networks: []string{"net"}}}}})
	if w.st[1].Pool(1).Held() != 0 {
		t.Fatal("group 1 allocated before any block was leased to it")
	}
	w.redrive(run)
	held, waiting := w.st[1].Pool(1).Held(), 0
	for _, id := range w.st[1].TaskIDs() {
		if tk := w.st[1].Task(id); tk.Status.State == StateNew {
			waiting++
			if !strings.Contains(tk.Message(), `network "net" is full`) {
				t.Fatalf("a task waiting on a full network says %q", tk.Message())
			}
		}
	}
	if held != 13 || waiting != 1 {
		t.Fatalf("group 1 holds %d (want all 13) with %d tasks waiting (want 1)", held, waiting)
	}
	if w.st[0].Pool(1).Leasable() != 0 {
		t.Fatal("the cluster group still has blocks to lease")
	}
}

// A cluster group loaded from a snapshot written before it kept leases
// (format 2) knows the blocks the service groups were striped then, so it
// never leases one of them to another group.
func TestVersion2ClusterSnapshotKeepsStripedBlocks(t *testing.T) {
	s := New(Config{Group: 0, Groups: 2})
	var out Output
	s.Apply([]Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/24"}}}, 1, 1, &out)
	got := loadOlderFormat(t, s, snapshotMagicV2, func(e *encoder) { s.encodeRedrive(e); s.encodeJoinKeys(e); s.encodeRequests(e) })
	p := got.Pool(1)
	for b := 1; b < p.NumBlocks(); b++ { // block 0 holds the network and gateway addresses only
		if o, _ := p.BlockOwner(ipam.BlockID(b)); o != uint32(b%2+1) {
			t.Fatalf("block %d leased to %d after loading a format-2 snapshot, want group %d", b, o, b%2+1)
		}
	}
}

// Requests for several networks of one group, computed from one view of
// it, are all granted: a grant of one network does not make the others'
// requests stale (the fence is per group and network). A second request
// for a network, computed before its grant was applied, is still stale.
func TestGrantsOfSeveralNetworksInOneRound(t *testing.T) {
	w := newLeaseWorld()
	run := func(s step) { w.apply(s.g, s.batch...) }
	var svcs []Command
	for i := range 3 {
		name := fmt.Sprintf("net%d", i)
		run(step{0, []Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(i + 1), Name: name, Subnet: fmt.Sprintf("10.%d.0.0/24", i+1)}}}})
		svcs = append(svcs, Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web" + name, Replicas: 3, Networks: []string{name}}})
	}
	w.redrive(run)
	run(step{1, svcs})
	applied, _ := w.st[1].OutboxApplied()
	wants := w.st[1].BlockWants()
	if len(wants) != 3 {
		t.Fatalf("group 1 wants blocks of %d networks, want 3: %+v", len(wants), wants)
	}
	var reqs []Command
	for _, want := range wants {
		reqs = append(reqs, Command{Kind: CmdRequestBlocks, Group: 1, Network: want.Network, Count: want.Count, Seq: applied})
	}
	for i, r := range w.apply(0, reqs...) {
		if r.ID == 0 {
			t.Fatalf("request %d of one round not granted: %+v", i, r)
		}
	}
	if r := w.apply(0, reqs[0]); r[0].ID != 0 || !strings.Contains(r[0].Msg, "stale") {
		t.Fatalf("a request computed before its network's grant was applied was answered %+v, want stale", r[0])
	}
	w.redrive(run)
	for _, id := range w.st[1].TaskIDs() {
		if tk := w.st[1].Task(id); tk.Status.State != StatePending {
			t.Fatalf("task %d is %s after the grants, want pending (%s)", id, tk.Status.State, tk.Message())
		}
	}
}

// A cluster group loaded from a format-3 snapshot (one fence per group)
// keeps that fence as a floor: what a group computed before the grant it
// fenced stays stale, for every network; later requests go through.
func TestVersion3ClusterSnapshotKeepsGroupFences(t *testing.T) {
	w := newLeaseWorld()
	run := func(s step) { w.apply(s.g, s.batch...) }
	run(step{0, []Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/24"}}}})
	w.redrive(run)
	// As a format-3 cluster group would have it: group 1 fenced at the
	// next outbox entry, no per-network fence.
	s := w.st[0]
	fence := s.OutboxNext() - 1
	s.ob.lastGrant[1] = fence
	got := loadOlderFormat(t, s, snapshotMagicV3, func(e *encoder) { s.encodeNetGrants(e); s.encodeJoinKeys(e); s.encodeRequests(e) })
	var out Output
	got.Apply([]Command{{Kind: CmdRequestBlocks, Group: 1, Network: 1, Count: 1, Seq: fence - 1}}, 100, 2e9, &out)
	if r := out.Results[0]; r.ID != 0 || !strings.Contains(r.Msg, "stale") {
		t.Fatalf("a request computed before the format-3 fence was answered %+v, want stale", r)
	}
	got.Apply([]Command{{Kind: CmdRequestBlocks, Group: 1, Network: 1, Count: 1, Seq: fence}}, 101, 2e9, &out)
	if r := out.Results[0]; r.ID == 0 {
		t.Fatalf("a request computed after the format-3 fence was answered %+v, want a grant", r)
	}
}

// loadOlderFormat writes s as an older format would have (the current
// encoding under magic, without the tail that format lacks and without
// its specs' labels and rollback configurations, which every format
// before 7 lacks) and loads it; s's specs must be such a format's (see
// oldSpecWorld).
func loadOlderFormat(t *testing.T, s *State, magic string, tail func(*encoder)) *State {
	t.Helper()
	canon := s.Canonical()
	var e encoder
	tail(&e)
	canon = withoutSpecExts(t, s, canon)
	old := append([]byte(magic), canon[len(snapshotMagic):len(canon)-len(e.b)]...)
	got, err := FromCanonical(old)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// BenchmarkGrantsToManyWaiting delivers, in one batch, a grant for each of
// 50 networks to a group where 25,000 tasks (500 per network) wait for
// blocks: one entry of the outbox duty's re-drive at scale.
func BenchmarkGrantsToManyWaiting(b *testing.B) {
	const nets, per = 50, 500
	w := newLeaseWorld()
	run := func(s step) { w.apply(s.g, s.batch...) }
	var svcs []Command
	for i := range nets {
		name := fmt.Sprintf("net%d", i)
		w.apply(0, Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(i + 1), Name: name, Subnet: fmt.Sprintf("10.%d.0.0/16", i+1)}})
		svcs = append(svcs, Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "svc" + name, Replicas: per, Networks: []string{name}}})
	}
	w.redrive(func(s step) {
		if s.batch[0].Kind == CmdDeliver {
			run(s)
		}
	})
	w.apply(1, svcs...) // group 1 holds no block yet: every task waits
	applied, _ := w.st[1].OutboxApplied()
	var reqs []Command
	for _, want := range w.st[1].BlockWants() {
		reqs = append(reqs, Command{Kind: CmdRequestBlocks, Group: 1, Network: want.Network, Count: want.Count, Seq: applied})
	}
	w.apply(0, reqs...)
	var ds []Command
	for _, e := range w.st[0].Outbox(applied) {
		ds = append(ds, Command{Kind: CmdDeliver, Group: 1, Entry: &e})
	}
	waiting := w.st[1].nWaiting
	if waiting < nets*per || len(ds) < nets {
		b.Fatalf("%d tasks waiting and %d grants, want %d and %d", waiting, len(ds), nets*per, nets)
	}
	var out Output
	for b.Loop() {
		b.StopTimer()
		s := w.st[1].Clone()
		b.StartTimer()
		s.Apply(ds, w.idx[1]+1, w.now, &out)
		if s.nWaiting == waiting {
			b.Fatal("no waiting task got its addresses")
		}
	}
}

// BenchmarkLeasedRamp is a service group's share of the loadgen's ramp
// with leased blocks: 10 services of 10,000 tasks, each on a network of
// its own that the group holds no block of yet, created one per entry
// (every task waits), then the cluster group's grants delivered in one
// entry (every task is served). create-µs/task and grant-µs/task are the
// two kinds of entry's CPU time per task (the process's, the collector's
// included: see processCPU); allocs/task counts both.
func BenchmarkLeasedRamp(b *testing.B) {
	const nets, per = 10, 10000
	var create, grant time.Duration
	var mallocs uint64
	var ms runtime.MemStats
	b.StopTimer()
	for range b.N {
		w := newLeaseWorld()
		for i := range nets {
			name := fmt.Sprintf("net%d", i)
			w.apply(0, Command{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: NetworkID(i + 1), Name: name, Subnet: fmt.Sprintf("10.%d.0.0/16", i+1)}})
		}
		w.redrive(func(s step) {
			if s.batch[0].Kind == CmdDeliver {
				w.apply(s.g, s.batch...)
			}
		})
		timed := func(d *time.Duration, f func()) {
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			cpu := processCPU(b)
			b.StartTimer()
			f()
			b.StopTimer()
			*d += processCPU(b) - cpu
			runtime.ReadMemStats(&ms)
			mallocs += ms.Mallocs - before
		}
		timed(&create, func() {
			for i := range nets {
				name := fmt.Sprintf("net%d", i)
				w.apply(1, Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "svc" + name, Replicas: per, Networks: []string{name}}})
			}
		})
		if w.st[1].nWaiting != nets*per {
			b.Fatalf("%d tasks wait, want %d", w.st[1].nWaiting, nets*per)
		}
		applied, _ := w.st[1].OutboxApplied()
		var reqs []Command
		for _, want := range w.st[1].BlockWants() {
			reqs = append(reqs, Command{Kind: CmdRequestBlocks, Group: 1, Network: want.Network, Count: want.Count, Seq: applied})
		}
		w.apply(0, reqs...)
		var ds []Command
		for _, e := range w.st[0].Outbox(applied) {
			ds = append(ds, Command{Kind: CmdDeliver, Group: 1, Entry: &e})
		}
		timed(&grant, func() { w.apply(1, ds...) })
		if w.st[1].nWaiting != 0 {
			b.Fatalf("%d tasks still wait after the grants", w.st[1].nWaiting)
		}
	}
	tasks := float64(b.N * nets * per)
	b.ReportMetric(float64(create.Nanoseconds())/tasks/1e3, "create-µs/task")
	b.ReportMetric(float64(grant.Nanoseconds())/tasks/1e3, "grant-µs/task")
	b.ReportMetric(float64(mallocs)/tasks, "allocs/task")
}
