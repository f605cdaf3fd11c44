package loadgen

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/loadgen/check"
	"shoal/loadgen/report"
)

// A planted bug through the real binary: managers built with the state
// machine's seams and told (SHOAL_SEAMS) to free a task's addresses the
// moment it ends, instead of keeping them in quarantine until its node
// confirms it let them go. Churn then hands an address to a new task on
// one agent while the agent of the task that ended still holds it, and
// the run must say so: address-agents violations naming both tasks and
// their nodes. The same run without the bug, same binary and seed, must
// report none (so the checks catch the bug, not the workload).
func TestPlantedAddressBugIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three managers and 60 agents, twice")
	}
	bin := buildShoal(t, "shoal_seams")
	run := func(t *testing.T, bugs string) (*report.Report, string) {
		t.Setenv("SHOAL_SEAMS", bugs) // the managers inherit it
		var out lockedBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		data := t.TempDir()
		// No leader kill: a replica restored from a snapshot has no seams.
		rep, err := Run(ctx, Config{Binary: bin, Agents: 60, Tasks: 1200, Services: 6, Seed: 5, Groups: 2,
			DataDir: data, SyncInterval: 3 * time.Second, Phases: []string{"ramp", "churn"},
			RampTimeout: 20 * time.Second, Churn: 10 * time.Second,
			ChurnRate: 6, CrashRate: 20, LeaderKillEvery: -1, Out: &out})
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		var table strings.Builder
		_ = writeTable(&table, rep)
		t.Logf("progress:\n%s\n%s", out.String(), table.String())
		logs, _ := os.ReadFile(filepath.Join(data, "m1.log"))
		return rep, string(logs)
	}
	t.Run("without the bug", func(t *testing.T) {
		rep, _ := run(t, "")
		if n := violations(rep, check.AddressAgents); n != 0 || rep.Violations != 0 {
			t.Fatalf("%d violations (%d address-agents) without the bug: %+v", rep.Violations, n, rep.ViolationList)
		}
	})
	t.Run("with the bug", func(t *testing.T) {
		rep, logs := run(t, "free-at-release")
		if !strings.Contains(logs, "plants the bugs SHOAL_SEAMS names: free-at-release") {
			t.Fatalf("replica 1 did not say it plants the bug; its log:\n%s", logs)
		}
		for _, v := range rep.ViolationList {
			if v.Invariant == check.AddressAgents && strings.Contains(v.Message, "is held on the agents by task") {
				t.Logf("caught, as expected: %s", v.Message)
				return
			}
		}
		t.Fatalf("the planted bug was not caught: %d violations %+v", rep.Violations, rep.ViolationList)
	})
}

// violations is how many violations of invariant a run reported.
func violations(rep *report.Report, invariant string) int {
	for _, inv := range rep.Invariants {
		if inv.Name == invariant {
			return inv.Violations
		}
	}
	return 0
}
