// Package invariants says whether this build asserts Shoal's internal
// invariants, in the manner of pebble's internal/invariants: code guards an
// expensive or fatal check with `if invariants.Enabled { ... }`, which a
// production build compiles away; tests build with -tags shoal_invariants
// (`make test` runs the state machine's and the scenarios' tests so) and a
// broken invariant panics there.
package invariants
