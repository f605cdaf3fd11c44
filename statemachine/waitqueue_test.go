package statemachine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestWaitPassServesLikeTheFullWalk: a pass over the services' queues
// gives addresses to exactly the tasks, and exactly the addresses, that
// trying every waiting task in ID order gives them, and leaves each
// service's waiting tasks saying why the first of them waits.
func TestWaitPassServesLikeTheFullWalk(t *testing.T) {
	nets := []string{"a", "b", "c"}
	served, refused := 0, 0
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		h := newHarness(t, Config{Group: 1})
		h.addNodes(1)
		for i, n := range nets {
			h.network(n, fmt.Sprintf("10.%d.0.0/27", i+1))
		}
		for i := range 2 + rng.IntN(4) {
			var use []string
			for _, n := range rng.Perm(len(nets))[:1+rng.IntN(len(nets))] {
				use = append(use, nets[n])
			}
			// Refused when a network has no address left for its VIP.
			h.apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("s%d", i),
				Replicas: uint32(1 + rng.IntN(20)), Networks: use}})
		}
		// Scale some up, so that services' waiting tasks interleave by ID.
		for _, id := range sortedKeys(h.s.services) {
			if rng.IntN(2) == 0 {
				spec := cloneSpec(&h.s.services[id].Spec)
				spec.Replicas += uint32(1 + rng.IntN(8))
				h.ok(Command{Kind: CmdUpdateService, Spec: &spec})
			}
		}
		// Free the addresses of some unplaced tasks, and stop some waiting
		// ones, without the pass that would follow in Apply.
		for _, id := range h.s.TaskIDs() {
			switch tk := h.s.tasks.get(id); {
			case tk.Status.State == StatePending && rng.IntN(4) == 0:
				h.s.deleteTask(tk, false)
			case tk.Status.State == StateNew && rng.IntN(6) == 0:
				h.s.setDesired(tk, DesiredShutdown)
			}
		}
		ref := h.s.Clone()
		waited := ref.waitingIDs()
		h.s.retryAllocation()
		ref.fullNets = map[string]error{}
		for _, id := range waited {
			ref.allocateTask(ref.waitingTask(id))
		}
		ref.fullNets = nil

		for _, id := range ref.TaskIDs() {
			got, want := h.s.tasks.get(id), ref.tasks.get(id)
			if got.Status.State != want.Status.State || !slices.Equal(got.Attachments, want.Attachments) {
				t.Fatalf("seed %d: task %d of service %d is %s with %v after the pass; trying every waiting task gives %s with %v",
					seed, id, got.Service, got.Status.State, got.Attachments, want.Status.State, want.Attachments)
			}
		}
		for _, id := range waited {
			if ref.tasks.get(id).Status.State == StatePending {
				served++
			} else if !ref.tasks.get(id).Desired.Stopping() {
				refused++
			}
		}
		if err := h.s.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: after the pass: %v", seed, err)
		}
		// Each service's waiting tasks say why the first of them waits.
		for _, sid := range sortedKeys(h.s.services) {
			first := ""
			for _, id := range h.s.services[sid].waitQ {
				if tk := h.s.waitingTask(id); tk != nil && !tk.Desired.Stopping() {
					if first == "" {
						first = tk.Message()
					} else if tk.Message() != first {
						t.Fatalf("seed %d: service %d's waiting task %d says %q, its first waiting task %q", seed, sid, id, tk.Message(), first)
					}
				}
			}
		}
	}
	if served == 0 || refused == 0 {
		t.Fatalf("the scenarios never served (%d) or never refused (%d) a waiting task", served, refused)
	}
}

// A task refused on one network keeps saying so only while that is why:
// when the first waiting task of its service is refused for another
// network, the later ones say that too (found in review: they kept naming
// a network that had free addresses again).
func TestWaitingTasksSayWhyTheirServiceWaits(t *testing.T) {
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.network("x", "10.1.0.0/28")
	h.network("y", "10.2.0.0/28")
	scale := func(name string, n uint32, nets ...string) {
		spec := ServiceSpec{Name: name, Networks: nets}
		kind := CmdCreateService
		if svc := h.s.ServiceByName(name); svc != nil {
			spec, kind = cloneSpec(&svc.Spec), CmdUpdateService
		}
		spec.Replicas = n
		h.ok(Command{Kind: kind, Spec: &spec})
	}
	scale("a", 0, "x", "y")
	scale("b", 0, "y")
	scale("c", 0, "x")
	scale("b", 11) // y is full
	scale("a", 1)  // a.1 waits for y
	scale("c", 11) // x is full
	scale("a", 2)  // a.2 waits for x
	scale("c", 0)  // x has room again; a.1 still waits for y
	var msgs []string
	for _, tk := range h.tasksIn("a") {
		if tk.Status.State != StateNew || !strings.Contains(tk.Message(), `"y"`) {
			t.Fatalf("task %d of a is %s and says %q; want new, waiting for network y", tk.ID, tk.Status.State, tk.Message())
		}
		msgs = append(msgs, tk.Message())
	}
	if len(msgs) != 2 {
		t.Fatalf("a has %d tasks waiting, want 2", len(msgs))
	}
}

// TestRefusalsDoNotGrowWithWaitingTasks: within one entry, the pools
// refuse a task at most once per network in each pass over the waiting
// tasks and each loop over the batch's new tasks, however many tasks
// wait (a network found full is not asked again for the next task).
func TestRefusalsDoNotGrowWithWaitingTasks(t *testing.T) {
	nets := []string{"a", "b", "c"}
	// An entry makes up to two passes and reactPasses loops over new
	// tasks.
	bound := uint64((2 + reactPasses) * len(nets))
	worst := uint64(0)
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		h := newHarness(t, Config{Group: 1})
		h.addNodes(1)
		for i, n := range nets {
			h.network(n, fmt.Sprintf("10.%d.0.0/27", i+1))
		}
		for step := range 12 {
			var cmd Command
			ids := sortedKeys(h.s.services)
			switch k := rng.IntN(4); {
			case k == 0 || len(ids) == 0:
				var use []string
				for _, n := range rng.Perm(len(nets))[:1+rng.IntN(len(nets))] {
					use = append(use, nets[n])
				}
				cmd = Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: fmt.Sprintf("s%d", step),
					Replicas: uint32(1 + rng.IntN(120)), Networks: use}}
			case k == 1:
				svc := h.s.services[ids[rng.IntN(len(ids))]]
				cmd = Command{Kind: CmdRemoveService, Name: svc.Spec.Name}
			default:
				spec := cloneSpec(&h.s.services[ids[rng.IntN(len(ids))]].Spec)
				spec.Replicas = uint32(rng.IntN(150))
				cmd = Command{Kind: CmdUpdateService, Spec: &spec}
			}
			before := h.s.refusals
			h.apply(cmd) // a VIP that finds no address refuses a create
			got := h.s.refusals - before
			worst = max(worst, got)
			if got > bound {
				t.Fatalf("seed %d: %s made the pools refuse %d times with %d tasks waiting; at most %d (passes and loops x networks)",
					seed, cmd.Kind, got, h.s.nWaiting, bound)
			}
		}
	}
	if worst == 0 {
		t.Fatal("no entry found a network full: the histories test nothing")
	}
}
