package scenario

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"shoal/sim/dialect"
	"shoal/sim/steps"
)

// TestScenarios runs testdata/scenarios/*.txt, each on a fresh
// steps.Runner, and fails a script at the first directive the runner
// refuses or after which the state breaks an invariant.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		r := steps.New()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := r.Do(dialect.FromData(d))
			if err != nil {
				t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
			}
			if err := r.CheckInvariants(); err != nil {
				t.Fatalf("%s: invariants violated after %q:\n%v", d.Pos, d.FullCmd(), err)
			}
			return out
		})
	})
}

// TestSpeaksItsVocabulary runs every directive the dialect lists for the
// scenario runner without arguments: none may be one it does not know.
func TestSpeaksItsVocabulary(t *testing.T) {
	for _, name := range dialect.Speaks(dialect.Scenario) {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s without arguments: panic: %v", name, p)
				}
			}()
			if _, err := steps.New().Do(dialect.Op{Cmd: name}); err != nil && strings.Contains(err.Error(), "unknown command") {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
}
