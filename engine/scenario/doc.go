// Package scenario holds scenario tests for Shoal's task model: scripts in
// testdata/scenarios/*.txt that drive the pure replicated state
// (shoal/statemachine) and the real leader duties one step at a time —
// "create-service web replicas=3", "node-status n1 down", "advance 30s",
// "report n1 web.1 running" — with a readable state dump as expected
// output.
//
// The one idea: this package is the scripts and their walk. The runner is
// shoal/sim/steps (the in-memory cluster, the duties, the role-played
// agents and user, the dump), and the words are shoal/sim/dialect's, which
// sim's scripts and engine/monitor's speak too: a word means the same step
// in each, and the runner refuses a word the dialect does not list for it
// (docs/sim.md, "One dialect for three runners").
//
// Contract:
//
//   - A script fails at the first directive the runner refuses, and after
//     any directive that leaves the state breaking State.CheckInvariants,
//     whatever the script expected.
//   - Expected output is regenerated with
//     go test ./engine/scenario/... -rewrite
//     and must then be read: a rewrite blesses whatever the code does.
//
// The directives are listed in sim/steps/runner.go.
package scenario
