package loadgen

import (
	"testing"

	"shoal/loadgen/report"
)

// Each threshold passes exactly when its figure satisfies it; durations
// compare in seconds, latencies (milliseconds in the report) too; a run
// that did not converge fails every converge threshold; an unreadable
// expression, or a figure the run did not measure, fails.
func TestThresholdsJudgeTheirFigure(t *testing.T) {
	r := &report.Report{Violations: 0, Converged: true, ConvergeSeconds: 4.5, HeapBytesPerTask: 900, TasksRunning: 1000,
		Latencies: []report.Latency{{Name: "create_to_running", P50: 800, P99: 4200}},
		Phases:    []report.Phase{{Name: "ramp", Seconds: 12}}}
	for _, c := range []struct {
		expr string
		ok   bool
	}{
		{"converge<20s", true}, {"converge<4s", false}, {"converge <= 4.5", true}, {"converge>5s", false},
		{"running_p99<5s", true}, {"running_p99<4s", false}, {"running_p50<=800ms", true},
		{"heap_per_task<1024", true}, {"heap_per_task<900", false}, {"heap_per_task>=900", true},
		{"violations<1", true}, {"tasks_running>=1000", true}, {"ramp<10s", false}, {"ramp<30s", true},
		{"assigned_p99<1s", false}, // not measured in this report
		{"converge<abc", false}, {"bogus", false},
	} {
		if got := evalThresholds([]string{c.expr}, r)[0]; got.OK != c.ok {
			t.Errorf("%s: ok=%t (value %g), want %t", c.expr, got.OK, got.Value, c.ok)
		}
	}
	r.Converged = false
	if evalThresholds([]string{"converge<1000s"}, r)[0].OK {
		t.Error("a run that did not converge passed converge<1000s")
	}
}

// CheckThresholds accepts what evalThresholds can read and refuses the
// rest before a run.
func TestCheckThresholds(t *testing.T) {
	if err := CheckThresholds([]string{"converge<20s", "running_p99 < 5s", "heap_per_task<=1024", "violations<1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"converge", "<5s", "converge<", "speed<5s", "converge<5 parsecs"} {
		if err := CheckThresholds([]string{"violations<1", bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every figure a threshold can name reads its value from a full report:
// one that found nothing would pass the check and then always fail.
func TestEveryThresholdNameIsAFigure(t *testing.T) {
	r := &report.Report{Converged: true, Phases: []report.Phase{{Name: "ramp"}},
		Latencies: []report.Latency{{Name: "create_to_running"}, {Name: "create_to_assigned"}}}
	for _, name := range thresholdNames {
		if _, ok := thresholdValue(name, r); !ok {
			t.Errorf("threshold figure %q is accepted but has no value in a full report", name)
		}
	}
	if _, ok := thresholdValue("speed", r); ok {
		t.Error("an unknown figure has a value")
	}
}
