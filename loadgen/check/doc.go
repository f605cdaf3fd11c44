// Package check is the loadgen's online invariant checker: a pure value fed
// with what a user and the agents see — event-stream events (with the task
// and node objects the manager rendered), what each simulated agent was
// handed, and which addresses each agent's executor holds — that answers
// with the violations of the task model's invariants (shared/DESIGN.md) it
// saw.
//
// The one idea: the invariants are checked on real data as it flows, by a
// type that does no I/O and reads no clock (callers pass the time), so a
// test can plant a bug by feeding it a made-up stream.
//
// What it checks (Names):
//
//   - address-agents: no address is held by two tasks at once on the
//     agents (held from prepare until the agent forgets the task — that is,
//     until its sync can confirm the release).
//   - address-live: no address is attached (unreleased) to two tasks that
//     are both not terminal: suspected in the event stream's view, counted
//     once a read of the replicated state confirms it (see Suspect).
//   - no-vanish: a task is deleted only once terminal, or before it was
//     ever assigned.
//   - monotone: a task's observed state never moves to a lower rank within
//     one event-stream connection (a reconnect to a lagging replica may
//     show older objects; those are not merged and not flagged).
//   - task-shape: a task at or past assigned has a node unless rejected; no
//     observed state is unknown.
//   - own-node: an agent is handed only tasks of its own node.
//   - one-per-slot: at quiescence, at most one running task per slot.
//   - as-desired: at quiescence, every service has exactly its desired
//     running count, and no other service has running tasks.
//   - replicas-agree: at quiescence, replicas that applied a group up to the
//     same index hold the same state (GET /v1/status?hash=true); fed by the
//     run, which reads the managers.
//   - held-aside: a task still running on a node back from a disconnect
//     is not stopped before the node re-reported its tasks (the entry that
//     made the node initializing stops none of them; node events, per
//     group; aside.go).
//
// The checker is safe for concurrent use (one mutex); the stream follower
// and thousands of agents feed it.
package check
