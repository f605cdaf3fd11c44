package duty

import (
	"context"
	"testing"

	"shoal/route"
	"shoal/statemachine"
)

// rawCluster is a Memory without its own removal check and outbox
// delivery: like the engine, its SubmitMany only routes and applies.
type rawCluster struct{ *Memory }

func (r rawCluster) SubmitMany(_ context.Context, cmds []statemachine.Command) []route.Outcome {
	out := make([]route.Outcome, len(cmds))
	r.submit(cmds, make([]bool, len(cmds)), out)
	return out
}

// A Submitter over a raw cluster submits as Memory does: node and network
// changes reach every service group before SubmitMany returns (not before
// SubmitBeforeFanout does), and a removal a service group would refuse is
// refused before the cluster group applies it, alone in its batch.
func TestSubmitterChecksRemovalsAndDelivers(t *testing.T) {
	ctx := context.Background()
	m := newMem(t, 2, nil)
	raw := rawCluster{m}
	s := NewSubmitter(raw, nil)
	known := func(name string) (groups []int) {
		for g := 0; g <= m.Groups(); g++ {
			_ = m.ReadLocal(g, func(st *statemachine.State) {
				if st.NetworkByName(name) != nil {
					groups = append(groups, g)
				}
			})
		}
		return groups
	}
	network := func(id statemachine.NetworkID, name, subnet string) statemachine.Command {
		return statemachine.Command{Kind: statemachine.CmdCreateNetwork,
			NetworkSpec: &statemachine.Network{ID: id, Name: name, Subnet: subnet}}
	}

	if _, err := s.Submit(ctx, network(1, "backend", "10.1.0.0/16")); err != nil {
		t.Fatal(err)
	}
	if g := known("backend"); len(g) != 3 {
		t.Fatalf("network submitted through the Submitter is known in groups %v, want 0, 1 and 2", g)
	}
	if _, err := s.SubmitBeforeFanout(ctx, network(2, "front", "10.2.0.0/16")); err != nil {
		t.Fatal(err)
	}
	if g := known("front"); len(g) != 1 || g[0] != route.ClusterGroup {
		t.Fatalf("network submitted before the fan-out is known in groups %v, want the cluster group alone", g)
	}

	web := statemachine.ServiceSpec{Name: "web", Replicas: 1, Networks: []string{"backend"}}
	if _, err := s.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &web}); err != nil {
		t.Fatal(err)
	}
	remove := statemachine.Command{Kind: statemachine.CmdRemoveNetwork, Name: "backend"}
	api := statemachine.ServiceSpec{Name: "api", Replicas: 1}
	outs := s.SubmitMany(ctx, []statemachine.Command{remove, {Kind: statemachine.CmdCreateService, Spec: &api}})
	if outs[0].Result.Code != statemachine.CodeNotAllowed {
		t.Fatalf("removing a network a service uses: %+v, want refused", outs[0])
	}
	if err := outs[1].Err(); err != nil {
		t.Fatalf("a command beside the refused removal: %v", err)
	}
	if g := known("backend"); len(g) != 3 {
		t.Fatalf("after the refused removal the network is known in groups %v, want 0, 1 and 2", g)
	}
	var created bool
	_ = m.ReadLocal(route.ServiceGroup("api", m.Groups()), func(st *statemachine.State) { created = st.ServiceByName("api") != nil })
	if !created {
		t.Fatal("the service created beside the refused removal is missing")
	}

	// The check is the Submitter's: the raw cluster's group applies it.
	if err := raw.SubmitMany(ctx, []statemachine.Command{remove})[0].Err(); err != nil {
		t.Fatalf("raw removal: %v", err)
	}
	if g := known("backend"); len(g) != 2 || g[0] == route.ClusterGroup {
		t.Fatalf("after the raw removal the network is known in groups %v, want the service groups alone", g)
	}
}
