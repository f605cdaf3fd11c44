package statemachine

import (
	"strings"
	"testing"
)

// checkFixpoint, which react calls in a shoal_invariants build, passes a
// state react finished with and panics on one with work left.
func TestCheckFixpoint(t *testing.T) {
	h := newHarness(t, Config{})
	h.addNodes(1)
	h.ok(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 2}})
	h.s.checkFixpoint()
	h.s.markDirty(h.s.ServiceByName("web"))
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "react left work") || !strings.Contains(r, "web") {
			t.Fatalf("panic %q; want one naming the service left dirty", r)
		}
	}()
	h.s.checkFixpoint()
	t.Fatal("no panic with a service left dirty")
}
