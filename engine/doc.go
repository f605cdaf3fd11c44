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
//     carries them to every service group (each holds a mirror). The rule
//     is shoal/route's, with the one Outcome of a submitted command
//     and ErrNoGroup. N is fixed when a data directory is created and a
//     later, different N is refused.
//   - The engine is Raft only: route, propose, read, leadership,
//     membership. It imports no leader duty: SubmitMany returns once each
//     command's group applied it; checking a removal with every service
//     group first and delivering the cluster group's outbox before a
//     submission returns are duty.Submitter's, which manager.Start wraps
//     around the engine.
//   - Every entry carries the proposer's clock reading (unix nanoseconds) in
//     its header, and the time after which it must not apply (the earliest
//     of its submitters' deadlines and its ProposeTimeout, plus
//     ClockBound); statemachine.ApplyEntry receives both, never the
//     replica's clock, so every replica applies (or refuses) the same
//     thing. A group's leader proposes a time entry after an election
//     timeout with nothing proposed, so an idle group's time moves too.
//   - A corrupt entry (bad header or undecodable batch) is applied by every
//     replica as a no-op that yields a statemachine.ErrCorrupt result. It
//     never panics and never makes replicas diverge. An entry in a format
//     newer than this build knows (statemachine.ErrNewerFormat) is not
//     corrupt but unreadable here: skipping it would part this replica
//     from those that read it, so the replica stops (panics) saying so.
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
//     Reads of a group share barriers: a read waits for the first barrier
//     asked after it began (one per group at a time, the next asked when it
//     ends or has taken an election timeout), so many reads at once cost
//     about one read index per group per round trip.
//   - Leader-only Duties run while this replica leads the cluster group; the
//     context passed to Run is cancelled when leadership is lost or the
//     engine closes, and a new term's duties start only after the old ones
//     returned. The duties themselves (scheduler driver, node monitor,
//     timers, outbox) live in shoal/engine/duty over its Cluster
//     interface, which *Engine satisfies; manager.Start builds them and
//     registers them with AddDuty.
//   - Time is Config.Clock (shoal/internal/clock), the wall clock unless a
//     test injects one.
//   - Snapshots are zstd-compressed full copies of a group's state; the
//     Raft log is compacted behind them, which keeps disk use bounded.
//
// Two ways to run: one replica in the process (the default: Open with a
// data directory), or one replica per process with explicit peers (shoal
// serve --id --raft-addr --peers; the engine's tests start several in one
// process on loopback ports).
package engine
