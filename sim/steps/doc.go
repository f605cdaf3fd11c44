// Package steps runs scenarios of Shoal's task model one component step at
// a time: the pure replicated state (shoal/statemachine) and the real
// leader duties over shoal/engine/duty's in-memory cluster, driven the way
// the design discussions describe them — "create-service web replicas=3",
// "node-status n1 down", "advance 30s", "report n1 web.1 running" — with a
// readable state dump as output. engine/scenario's scripts run on it.
//
// The one idea: a scenario is a deterministic story told in the dialect of
// shoal/sim/dialect, one step per directive. There is no Raft, no
// goroutine, no sleep: the world is the cluster group and one service
// group, entries stamped by a fake clock that only "advance" moves, and
// the duties run only when a directive says — "schedule" is one run of the
// scheduler driver (scan → sched.Place → assign), "advance" one run of the
// timer duty, "heartbeat" and "monitor-tick" the node monitor duty. The
// runner plays the agents ("report", "sync") and the user, so a script
// shows every component's step. Package sim, beside it, runs the whole
// system on its own (replicas, the agent protocol, real agents) in the
// same dialect.
//
// Contract:
//
//   - Runner.Do prints each directive's command results (rejections
//     verbatim, as Result.Err renders them) and the tasks and services the
//     reaper deleted; "dump" prints services, tasks per slot oldest first,
//     nodes and address pools. Output is deterministic: IDs, not pointers
//     or map order.
//   - Do refuses a directive the dialect does not list for the scenario
//     runner (dialect.Check) and reports an entry that reported one
//     deletion twice; CheckInvariants is State.CheckInvariants, which
//     engine/scenario's test runs after every directive.
//
// The directives are listed in runner.go.
package steps
