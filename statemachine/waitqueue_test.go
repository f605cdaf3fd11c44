package statemachine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWaitPassServesLikeTheFullWalk: a pass over the services' queues
// gives addresses to exactly the tasks, and exactly the addresses, that
// trying every waiting task in ID order gives them.
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
			switch tk := h.s.tasks[id]; {
			case tk.Status.State == StatePending && rng.IntN(4) == 0:
				h.s.deleteTask(tk, false)
			case tk.Status.State == StateNew && rng.IntN(6) == 0:
				h.s.setDesired(tk, DesiredShutdown)
			}
		}
		ref := h.s.Clone()
		waited := sortedKeys(ref.waiting)
		h.s.retryAllocation()
		ref.fullNets = map[string]error{}
		for _, id := range waited {
			ref.allocateTask(ref.waiting[id])
		}
		ref.fullNets = nil

		for _, id := range sortedKeys(ref.tasks) {
			got, want := h.s.tasks[id], ref.tasks[id]
			if got.Status.State != want.Status.State || !slices.Equal(got.Attachments, want.Attachments) {
				t.Fatalf("seed %d: task %d of service %d is %s with %v after the pass; trying every waiting task gives %s with %v",
					seed, id, got.Service, got.Status.State, got.Attachments, want.Status.State, want.Attachments)
			}
		}
		for _, id := range waited {
			if ref.tasks[id].Status.State == StatePending {
				served++
			} else if !ref.tasks[id].Desired.Stopping() {
				refused++
			}
		}
		if err := h.s.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: after the pass: %v", seed, err)
		}
	}
	if served == 0 || refused == 0 {
		t.Fatalf("the scenarios never served (%d) or never refused (%d) a waiting task", served, refused)
	}
}
