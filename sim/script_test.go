package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"shoal/sim/dialect"
)

// TestScripts runs testdata/scripts/*.txt: each starts with a "sim"
// directive (the world's seed and shape), then the dialect of World.Do.
// After every directive the checker's new violations are printed, so a
// script that breaks an invariant shows it in its expected output. A
// script fails if the checker saw any violation, unless it declares with
// "expect-violation <invariant>" the one it must see (a planted bug's
// script), and then it fails if the checker did not see it.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		var w *World
		seen := 0
		expect := ""
		defer func() {
			if w == nil || t.Skipped() {
				return
			}
			got := map[string]int{}
			for _, r := range w.chk.Results() {
				got[r.Name] = r.Violations
			}
			var b strings.Builder
			w.violations(&b)
			switch {
			case expect != "" && got[expect] == 0:
				t.Errorf("%s: the checker did not see the expected %s violation", path, expect)
			case expect == "" && w.Violations() > 0:
				t.Errorf("%s: invariants broken:\n%s", path, b.String())
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			op := dialect.FromData(d)
			if err := dialect.Check(dialect.Sim, op); err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			if op.Cmd == "expect-violation" {
				if len(op.Pos) != 1 {
					t.Fatalf("%s: expect-violation wants one invariant", d.Pos)
				}
				expect = op.Pos[0]
				return ""
			}
			if op.Cmd == "sim" {
				cfg, err := ConfigOf(op)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				if cfg.Plant != "" && !SeamsCompiled {
					t.Skip("plants a seeded bug: needs -tags shoal_seams")
				}
				if w, err = New(cfg); err != nil {
					return "error: " + err.Error() + "\n"
				}
				return ""
			}
			if w == nil {
				t.Fatalf("%s: the script must start with a sim directive", d.Pos)
			}
			out, err := w.Do(op)
			if err != nil {
				out += "error: " + err.Error() + "\n"
			}
			if n := w.Violations(); n > seen {
				var b strings.Builder
				w.violations(&b)
				out += fmt.Sprintf("VIOLATIONS (%d):\n%s", n, b.String())
				seen = n
			}
			return out
		})
	})
}

// TestSpeaksItsVocabulary runs every directive the dialect lists for sim
// (but the script's headers, which TestScripts reads) without arguments:
// none may be one World.Do does not know.
func TestSpeaksItsVocabulary(t *testing.T) {
	for _, name := range dialect.Speaks(dialect.Sim) {
		if name == "sim" || name == "expect-violation" || name == "stabilize" {
			continue // stabilize knows no argument-less refusal; TestScripts runs it
		}
		w, err := New(Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Do(Op{Cmd: name}); err != nil && strings.Contains(err.Error(), "unknown directive") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
