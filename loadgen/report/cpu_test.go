package report

import (
	"bytes"
	"html"
	"strings"
	"testing"
)

// Each sample's CPU counts toward the phase it was taken in, grouped as
// replicas, agents and loadgen; the table and the page show each phase's
// average cores busy out of the machine's.
func TestPhaseCPUIsCountedPerPhaseAndShown(t *testing.T) {
	s := Series{
		Seconds: []float64{1, 2, 3, 5, 6},
		Phase:   []string{"ramp", "ramp", "ramp", "quiesce", "quiesce"},
		CPU: map[string][]float64{
			"replica 1": {9, 1, 1, 0.5, 0.5}, // the first sample has no interval: never counted
			"replica 2": {9, 0.5, 0.5, 0.25, 0.25},
			"agents":    {9, 0.25, 0.25, 0.5, 0.5},
			"loadgen":   {9, 0.1, 0.1, 0, 0},
		},
	}
	ramp, quiesce := PhaseCPU(s, "ramp"), PhaseCPU(s, "quiesce")
	want := map[string][2]float64{"replicas": {3, 2.25}, "agents": {0.5, 1.5}, "loadgen": {0.2, 0}}
	for g, w := range want {
		if ramp[g] != w[0] || quiesce[g] != w[1] {
			t.Errorf("%s: ramp %v, quiesce %v CPU seconds; want %v and %v", g, ramp[g], quiesce[g], w[0], w[1])
		}
	}
	r := &Report{Machine: Machine{CPUs: 2}, Series: s, Phases: []Phase{
		{Name: "ramp", StartSeconds: 0, Seconds: 2, CPUSeconds: ramp},
		{Name: "quiesce", StartSeconds: 3, Seconds: 3, CPUSeconds: quiesce}}}
	var table, page bytes.Buffer
	if err := WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"1.50 + 0.25 + 0.10 = 1.85 of 2", "0.75 + 0.50 + 0.00 = 1.25 of 2"} {
		if !strings.Contains(table.String(), line) || !strings.Contains(html.UnescapeString(page.String()), line) {
			t.Errorf("table and page should both say %q:\n%s", line, table.String())
		}
	}
	if ChartsWithData(r) == 0 || !strings.Contains(page.String(), `data-chart="cpu"`) {
		t.Error("the page has no CPU chart")
	}
}
