// Package scenario holds scenario tests for Shoal's task model: scripts in
// testdata/scenarios/*.txt that drive the pure replicated state
// (shoal/statemachine) the way the design discussions describe it —
// "create-service web replicas=3", "node-status n1 down", "advance 30s",
// "report n1 web.1 running" — with a readable state dump as expected output.
//
// The one idea: a scenario is a deterministic story. There is no Raft, no
// goroutine, no sleep: every directive becomes one statemachine.Apply with
// the next Raft index and the reading of a fake clock that only "advance"
// moves. The runner also plays the scheduler ("schedule") and the agents
// ("report", "sync") so a script shows every component's step.
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
// Script commands are documented in runner_test.go.
package scenario
