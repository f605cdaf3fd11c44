// Package dialect is the one datadriven dialect of Shoal's deterministic
// tests: how a directive is read, and the words every runner uses for the
// same step. Three runners speak it: sim (the whole system on a simulated
// clock, sim/testdata/scripts), engine/scenario (the replicated state and
// the leader duties over duty.Memory, one step at a time) and
// engine/monitor's (the node monitor's table alone).
//
// The one idea: a directive is a command, positional words and key=value
// options (datadriven's arguments, a value list joined by commas), and a
// word means one thing wherever it is used — "advance 30s" is time
// passing, "heartbeat n1" a node's heartbeat, "report n1 web.1 running" a
// status report, "node-status n1 down" the replicated status — so a
// script reads the same in every runner, and a scenario moves from one to
// another by changing only what the runner cannot do.
//
// Contract:
//
//   - Op is a parsed directive; Parse reads a script line and FromData a
//     datadriven directive, and String prints one back: Parse(op.String())
//     is op.
//   - Only and Want refuse, with a message naming the directive, options
//     and positional words a directive does not take, so a misspelt
//     option fails a script instead of being ignored.
//   - Task names are service.slot (the slot's newest task) or
//     service.slot#k (its k-th oldest); TaskName splits one.
//   - Vocabulary lists every directive, the runners that speak it and its
//     usage; each runner's tests check that every directive it runs is
//     listed there with it (docs/sim.md, "The dialect").
package dialect
