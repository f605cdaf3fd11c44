package loadgen

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLoadgenImports guards the house rule: the loadgen sees the cluster
// only through the API, the event stream and its agents — never the
// engine or a manager, directly or through anything else.
func TestLoadgenImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "shoal/engine") || strings.HasPrefix(p, "shoal/manager") || strings.HasPrefix(p, "github.com/lni/") {
			t.Errorf("loadgen depends on %s", p)
		}
	}
}
