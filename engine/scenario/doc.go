// Package scenario holds scenario tests for Shoal's task model: scripts in
// testdata/scenarios/*.txt that drive the pure replicated state
// (shoal/statemachine) the way the design discussions describe it —
// "create-service web replicas=3", "node-status n1 down", "advance 30s",
// "report n1 web.1 running" — with a readable state dump as expected output.
//
// The one idea: a scenario is a deterministic story. There is no Raft, no
// goroutine, no sleep: the world is shoal/engine/duty's in-memory cluster
// (the cluster group and one service group, entries stamped by a fake clock
// that only "advance" moves), and the real leader duties run over it —
// "schedule" is one run of the scheduler driver (scan → sched.Place →
// assign), "advance" one run of the timer duty, "heartbeat" and
// "monitor-tick" the node monitor duty. The runner plays the agents
// ("report", "sync") and the user, so a script shows every component's
// step in one dialect.
//
// Contract:
//
//   - Each directive prints its command results (rejections verbatim, as
//     Result.Err renders them) and the tasks and services the reaper deleted;
//     "dump" prints services, tasks per slot oldest first, nodes and address
//     pools. Output is deterministic: IDs, not pointers or map order.
//   - After every directive the runner calls State.CheckInvariants and fails
//     the test on a violation, whatever the script expected.
//   - Expected output is regenerated with
//     go test ./engine/scenario/... -rewrite
//     and must then be read: a rewrite blesses whatever the code does.
//
// Scripts are in the dialect of shoal/sim/dialect, which sim's scripts and
// engine/monitor's speak too: a word means the same step in each, and the
// runner refuses a word the dialect does not list for it (docs/sim.md,
// "One dialect for three runners"). Script commands are documented in
// runner_test.go.
package scenario
