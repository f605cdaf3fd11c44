package statemachine

import "testing"

// SpecAt answers with the current spec at SpecVersion, the previous one at
// SpecVersion-1, and the current one, not kept, for anything older — also
// after a rollback, which swaps the two.
func TestSpecAt(t *testing.T) {
	h := newHarness(t, Config{})
	spec := ServiceSpec{Name: "web", Replicas: 1, Image: "v1"}
	h.ok(Command{Kind: CmdCreateService, Spec: &spec})
	for _, img := range []string{"v2", "v3"} {
		spec.Image = img
		h.ok(Command{Kind: CmdUpdateService, Spec: &spec})
	}
	svc := h.s.ServiceByName("web")
	check := func(v uint32, image string, kept bool) {
		t.Helper()
		sp, ok := svc.SpecAt(v)
		if sp.Image != image || ok != kept {
			t.Errorf("service at v%d: SpecAt(%d) = %s, %v; want %s, %v", svc.SpecVersion, v, sp.Image, ok, image, kept)
		}
	}
	check(3, "v3", true)
	check(2, "v2", true)
	check(1, "v3", false)
	check(4, "v3", false)
	h.ok(Command{Kind: CmdRollbackService, Name: "web"})
	check(4, "v2", true)
	check(3, "v3", true)
	check(2, "v2", false)
}
