package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"shoal/loadgen/check"
)

// A planted bug through the real binary: managers built with the state
// machine's seams and told (SHOAL_SEAMS) to free a task's addresses the
// moment it ends, instead of keeping them in quarantine until its node
// confirms it let them go. Churn then hands an address to a new task on
// one agent while the agent of the task that ended still holds it, and
// the run must say so: an address-agents violation naming both tasks,
// and a failed run. (TestChaosRun is the same kind of run without the
// bug, and passes.)
func TestPlantedAddressBugIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three managers and 60 agents")
	}
	bin := buildShoal(t, "shoal_seams")
	t.Setenv("SHOAL_SEAMS", "free-at-release") // the managers inherit it
	var out lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// No leader kill: a replica restored from a snapshot has no seams.
	rep, err := Run(ctx, Config{Binary: bin, Agents: 60, Tasks: 1200, Services: 6, Seed: 5, Groups: 2,
		DataDir: t.TempDir(), SyncInterval: 3 * time.Second, Phases: []string{"ramp", "churn"},
		RampTimeout: 20 * time.Second, Churn: 10 * time.Second,
		ChurnRate: 6, CrashRate: 20, LeaderKillEvery: -1, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var table strings.Builder
	_ = writeTable(&table, rep)
	t.Logf("progress:\n%s\n%s", out.String(), table.String())
	var caught *string
	for _, v := range rep.ViolationList {
		if v.Invariant == check.AddressAgents && strings.Contains(v.Message, "task ") {
			caught = &v.Message
			break
		}
	}
	if rep.Violations == 0 || caught == nil {
		t.Fatalf("the planted bug was not caught: %d violations %+v", rep.Violations, rep.ViolationList)
	}
	t.Logf("caught, as expected: %s", *caught)
}
