package report

import (
	"bytes"
	"html"
	"strings"
	"testing"
)

// A phase's CPU is what the samples' intervals within its start and end
// used (not every sample labelled with it: labels go on after a phase
// ends), grouped as replicas, agents and loadgen; the table and the page
// show each phase's average cores busy out of the machine's.
func TestPhaseCPUIsCountedPerPhaseAndShown(t *testing.T) {
	s := Series{
		Seconds: []float64{1, 2, 3, 5, 6, 8},
		Phase:   []string{"ramp", "ramp", "ramp", "quiesce", "quiesce", "quiesce"},
		CPU: map[string][]float64{
			// The first sample has no interval; the last is after quiesce ended.
			"replica 1": {9, 1, 1, 0.5, 0.5, 9},
			"replica 2": {9, 0.5, 0.5, 0.25, 0.25, 9},
			"agents":    {9, 0.25, 0.25, 0.5, 0.5, 9},
			"loadgen":   {9, 0.1, 0.1, 0, 0, 9},
		},
	}
	phases := []Phase{{Name: "ramp", StartSeconds: 0, Seconds: 3}, {Name: "quiesce", StartSeconds: 3, Seconds: 3}}
	ramp, quiesce := PhaseCPU(s, phases[0]), PhaseCPU(s, phases[1])
	want := map[string][2]float64{"replicas": {3, 2.25}, "agents": {0.5, 1.5}, "loadgen": {0.2, 0}}
	for g, w := range want {
		if ramp[g] != w[0] || quiesce[g] != w[1] {
			t.Errorf("%s: ramp %v, quiesce %v CPU seconds; want %v and %v", g, ramp[g], quiesce[g], w[0], w[1])
		}
	}
	phases[0].CPUSeconds, phases[1].CPUSeconds = ramp, quiesce
	phases[0].CPUMicrosPerTask = PerTask(ramp, 1000)
	if got := phases[0].CPUMicrosPerTask; got["replicas"] != 3000 || got["agents"] != 500 || got["loadgen"] != 200 {
		t.Errorf("ramp CPU per task of 1,000 tasks: %v µs", got)
	}
	r := &Report{Machine: Machine{CPUs: 2}, Series: s, Phases: phases, Params: Params{Tasks: 1000}}
	var table, page bytes.Buffer
	if err := WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	// The quiesce's per-task figures are worked out from its CPU seconds.
	for _, line := range []string{"1.00 + 0.17 + 0.07 = 1.23 of 2", "0.75 + 0.50 + 0.00 = 1.25 of 2",
		"3000.0 + 500.0 + 200.0 = 3700.0", "2250.0 + 1500.0 + 0.0 = 3750.0"} {
		if !strings.Contains(table.String(), line) || !strings.Contains(html.UnescapeString(page.String()), line) {
			t.Errorf("table and page should both say %q:\n%s", line, table.String())
		}
	}
	if ChartsWithData(r) == 0 || !strings.Contains(page.String(), `data-chart="cpu"`) {
		t.Error("the page has no CPU chart")
	}
}
