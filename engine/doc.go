// Package engine runs Shoal's replicated state on dragonboat v4: one Raft
// group for the cluster (nodes, networks) and N service groups (services and
// their tasks, sharded by a hash of the service name), all hosted by one
// dragonboat NodeHost per manager process.
//
// The one idea: callers submit statemachine.Commands; the engine routes each
// to its group, coalesces concurrent submissions into one Raft entry per
// group, and hands every submitter its own statemachine.Result once the
// entry is applied on this replica.
//
// Contract:
//
//   - Routing is a pure function of the command and the group count:
//     services by 1+xxhash(name)%N; tasks by the group in the top 16 bits of
//     their TaskID; nodes and networks to the cluster group, whose outbox
//     delivers them to every service group (each holds a mirror): SubmitMany
//     delivers it before it returns, the outbox duty whatever that missed.
//     N is fixed when a data directory is created and a later, different N
//     is refused.
//   - Every entry carries the proposer's clock reading (unix nanoseconds) in
//     its header; statemachine.Apply receives that time, never the
//     replica's clock, so every replica applies the same thing.
//   - A corrupt entry (bad header or undecodable batch) is applied by every
//     replica as a no-op that yields a statemachine.ErrCorrupt result. It
//     never panics and never makes replicas diverge.
//   - Submissions to one group are proposed in submission order. An entry
//     that dragonboat drops before proposing it (no leader yet, system busy)
//     is retried with back-off, and one still waiting when a newer leader
//     is known is proposed again under its client session, which makes a
//     second copy harmless; an entry that times out (ErrTimeout, outcome
//     unknown) is not retried, because a command may not be idempotent.
//     A retried entry can land after entries proposed later; a submitter that
//     needs order waits for the earlier result first.
//   - Reads run a function over a group's *statemachine.State: Read after a
//     linearizable ReadIndex barrier, ReadLocal over this replica's state as
//     applied so far. The function must not keep or modify what it sees.
//   - Leader-only Duties run while this replica leads the cluster group; the
//     context passed to Run is cancelled when leadership is lost or the
//     engine closes, and a new term's duties start only after the old ones
//     returned. The duties themselves (scheduler driver, node monitor,
//     timers, outbox delivery) live in shoal/engine/duty over its Cluster
//     interface; NewDriver, NewMonitorDuty, NewTimerDuty and NewOutboxDuty
//     hand them this engine.
//   - Snapshots are zstd-compressed full copies of a group's state; the
//     Raft log is compacted behind them, which keeps disk use bounded.
//
// Two ways to run: one replica in the process (the default: Open with a
// data directory), or one replica per process with explicit peers (shoal
// serve --id --raft-addr --peers; the engine's tests start several in one
// process on loopback ports).
package engine
