package main

import (
	"strings"
	"testing"

	"shoal/loadgen/report"
)

func run(ramp, heap float64, running, violations int) *report.Report {
	return &report.Report{Params: report.Params{Tasks: 100}, TasksRunning: running, Violations: violations,
		HeapBytesPerTask: heap, Phases: []report.Phase{{Name: "ramp", Seconds: ramp}}}
}

// A slower run is flagged "worse" but passes (speed is noisy here); a run
// that broke an invariant or left tasks not running fails; a ratio inside
// the noise band is "~".
func TestCompare(t *testing.T) {
	var b strings.Builder
	if code := compare(&b, run(10, 1000, 100, 0), run(20, 1050, 100, 0)); code != 0 {
		t.Errorf("a slower run failed the comparison (exit %d)", code)
	}
	out := b.String()
	for _, want := range []string{"ramp (creates to all running) 10s 20s", "×2.00  worse", "×1.05  ~"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if code := compare(&b, run(10, 1000, 100, 0), run(5, 1000, 100, 0)); code != 0 || !strings.Contains(b.String(), "better") {
		t.Errorf("a faster run: exit %d\n%s", code, b.String())
	}
	for _, bad := range []*report.Report{run(10, 1000, 100, 1), run(10, 1000, 99, 0)} {
		b.Reset()
		if code := compare(&b, run(10, 1000, 100, 0), bad); code != 1 || !strings.Contains(b.String(), "FAIL") {
			t.Errorf("a run with %d violations and %d running passed: exit %d\n%s", bad.Violations, bad.TasksRunning, code, b.String())
		}
	}
}

// The ramp's CPU per task is compared where both runs recorded it (a
// baseline from before the report had it shows "—"), and each run says
// how many of its machine's cores its ramp kept busy.
func TestCompareRampCPU(t *testing.T) {
	withCPU := func(replicas, agents float64) *report.Report {
		r := run(10, 1000, 100, 0)
		r.Machine = report.Machine{CPUs: 2}
		r.Phases[0].CPUSeconds = map[string]float64{"replicas": replicas, "agents": agents, "loadgen": 1}
		return r
	}
	var b strings.Builder
	compare(&b, run(10, 1000, 100, 0), withCPU(0.01, 0.005))
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"replicas' CPU in the ramp, per task — 100µs —", "the ramp kept 0.10 of them busy"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	compare(&b, withCPU(0.01, 0.005), withCPU(0.02, 0.005))
	out = strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"replicas' CPU in the ramp, per task 100µs 200µs ×2.00 worse", "agents' CPU in the ramp, per task 50µs 50µs ×1.00 ~"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// Every phase's CPU per task is compared for the replicas, the agents and
// the loadgen, from the per-task figures a new report records or, in a
// baseline written before them, from its CPU seconds; the baseline
// checked in still reads.
func TestComparePhasesCPU(t *testing.T) {
	old := run(10, 1000, 100, 0)
	old.Phases = append(old.Phases, report.Phase{Name: "churn", Seconds: 5})
	old.Phases[0].CPUSeconds = map[string]float64{"replicas": 0.01, "agents": 0.005, "loadgen": 0.001}
	old.Phases[1].CPUSeconds = map[string]float64{"replicas": 0.02, "agents": 0.01, "loadgen": 0.004}
	now := run(10, 1000, 100, 0)
	now.Phases = append(now.Phases, report.Phase{Name: "churn", Seconds: 5})
	now.Phases[0].CPUSeconds = map[string]float64{"replicas": 1, "agents": 1, "loadgen": 1} // per-task figures win
	now.Phases[0].CPUMicrosPerTask = map[string]float64{"replicas": 50, "agents": 50, "loadgen": 5}
	now.Phases[1].CPUMicrosPerTask = map[string]float64{"replicas": 200, "agents": 100, "loadgen": 40}
	var b strings.Builder
	compare(&b, old, now)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"replicas' CPU in the ramp, per task 100µs 50µs ×0.50 better",
		"loadgen's CPU in the ramp, per task 10µs 5µs ×0.50 better",
		"replicas' CPU in the churn, per task 200µs 200µs ×1.00 ~",
		"agents' CPU in the churn, per task 100µs 100µs ×1.00 ~",
		"loadgen's CPU in the churn, per task 40µs 40µs ×1.00 ~",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	base, err := load("../baseline/e2e.json")
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	compare(&b, base, base)
	out = strings.Join(strings.Fields(b.String()), " ")
	for _, ph := range []string{"ramp", "churn", "faults", "quiesce"} {
		if !strings.Contains(out, "loadgen's CPU in the "+ph+", per task") {
			t.Errorf("the checked-in baseline compared with itself lacks the loadgen's %s CPU:\n%s", ph, b.String())
		}
	}
}

// With several runs a side, each figure is the median of that side's runs
// with their range, the ratio is of the medians, and one failing run of
// the set fails the comparison.
func TestCompareSetsUsesMedians(t *testing.T) {
	var b strings.Builder
	bases := []*report.Report{run(10, 1000, 100, 0), run(30, 1000, 100, 0), run(12, 1000, 100, 0)}
	runs := []*report.Report{run(6, 1000, 100, 0), run(99, 1000, 100, 0), run(24, 1000, 100, 0), run(20, 1000, 100, 0)}
	if code := compareSets(&b, bases, runs); code != 0 {
		t.Fatalf("exit %d\n%s", code, b.String())
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	// baseline median 12 (10–30); runs median (20+24)/2 = 22 (6–99).
	for _, want := range []string{"ramp (creates to all running) 12s (10–30) 22s (6–99) ×1.83 worse", "medians (range) of 3 baseline runs and 4 runs"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	runs[2] = run(24, 1000, 100, 2)
	if code := compareSets(&b, bases, runs); code != 1 || !strings.Contains(b.String(), "FAIL: run 3: 2 violations") {
		t.Errorf("a set with one broken run: exit %d\n%s", code, b.String())
	}
}
