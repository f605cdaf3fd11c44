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
