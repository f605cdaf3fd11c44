package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs testdata/scripts/*.txt: each starts with a "sim"
// directive (the world's seed and shape), then the dialect of World.Do.
// After every directive the checker's new violations are printed, so a
// script that breaks an invariant shows it in its expected output.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		var w *World
		seen := 0
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			op := opOf(d)
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

// opOf turns a datadriven directive into an Op.
func opOf(d *datadriven.TestData) Op {
	op := Op{Cmd: d.Cmd}
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			op.Pos = append(op.Pos, a.Key)
			continue
		}
		op.KV = append(op.KV, [2]string{a.Key, strings.Join(a.Vals, ",")})
	}
	return op
}
