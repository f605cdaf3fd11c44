package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A run whose quiesce phase did not run says its convergence was not measured,
// in the table and on the page; a run whose quiesce phase timed out says
// it did not converge; neither page nor table claims what was not seen.
func TestConvergenceSaysWhetherItWasMeasured(t *testing.T) {
	for _, c := range []struct {
		phases  []string
		conv    bool
		want    string
		notWant string
	}{
		{[]string{"ramp"}, false, "not measured (the quiesce phase did not run)", "did not converge"},
		{[]string{"ramp", "quiesce"}, false, "did not converge", "not measured"},
		{[]string{"ramp", "quiesce"}, true, "2.50", "did not converge"},
	} {
		r := &Report{Converged: c.conv, ConvergeSeconds: 2.5, Params: Params{Phases: c.phases, Tasks: 10}}
		for _, name := range []string{"ramp", "churn", "faults", "quiesce"} {
			r.Phases = append(r.Phases, Phase{Name: name, Skipped: !slices.Contains(c.phases, name)})
		}
		if !c.conv {
			r.ConvergeSeconds = -1
		}
		var table, page bytes.Buffer
		if err := WriteTable(&table, r); err != nil {
			t.Fatal(err)
		}
		if err := WriteHTML(&page, r); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"table": table.String(), "page": page.String()} {
			if !strings.Contains(out, c.want) || strings.Contains(out, c.notWant) {
				t.Errorf("phases %v, converged %v: the %s should say %q and not %q:\n%s", c.phases, c.conv, name, c.want, c.notWant, convergeLine(out))
			}
		}
	}
}

// convergeLine is the part of a table or page about convergence.
func convergeLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "onverge") {
			return l
		}
	}
	return out
}
