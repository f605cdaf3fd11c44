package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentImports guards the house rule: the agent knows wire/, the
// statemachine's enums and IDs, internal/clock, internal/procstat and
// pebble, and never the
// engine (directly or through anything else) nor fasthttp.
func TestAgentImports(t *testing.T) {
	direct, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := map[string]bool{"shoal/wire": true, "shoal/statemachine": true, "shoal/internal/clock": true, "shoal/internal/procstat": true, "shoal/internal/varint": true,
		"github.com/cockroachdb/pebble": true}
	for _, p := range strings.Fields(string(direct)) {
		first, _, _ := strings.Cut(p, "/")
		if (strings.Contains(first, ".") || first == "shoal") && !allowed[p] {
			t.Errorf("agent imports %s", p)
		}
	}
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(deps)) {
		if strings.HasPrefix(p, "shoal/engine") || strings.Contains(p, "fasthttp") || strings.HasPrefix(p, "github.com/lni/") {
			t.Errorf("agent depends on %s", p)
		}
	}
}
