// Package monitor is the node monitor's heartbeat table: the leader-side,
// in-memory record of when each node last heartbeated, and the node status
// changes that follow from it.
//
// The one idea: heartbeats live in the leader's memory, not in Raft; only
// status changes become Raft commands. Monitor turns (heartbeats, the node
// statuses the replicated state holds, now) into those changes, as data:
// Heartbeat answers the TTL the agent should use next and, when a heartbeat
// reconnects a node, the status change to propose; Tick answers the nodes
// whose heartbeat expired and the nodes down past the orphan timeout.
//
// Contract:
//
//   - Pure: no goroutines, no wall clock, no global randomness, no I/O; the
//     package imports no dragonboat, pebble or fasthttp. Time arrives as
//     int64 unix nanoseconds. A Monitor is not safe for concurrent use: the
//     engine-side duty that owns it holds a lock.
//   - The TTL grows with the node count toward Config.TargetRate
//     heartbeats per second cluster-wide (never below MinTTL), plus a jitter
//     derived from the node ID and its heartbeat count, so the same inputs
//     always give the same TTL. A node expires GraceFactor × the TTL it was
//     last handed after its last heartbeat.
//   - Status rules (DESIGN.md, "Disconnects and reconnects"): an expired
//     ready node becomes disconnected if Config.Disconnectable says it
//     holds tasks with a disconnect window, else down; an expired
//     initializing node always becomes down; a disconnected or down node that heartbeats becomes
//     initializing; an initializing node becomes ready at a heartbeat once
//     the caller marked it re-reported (MarkReReported). Every emitted step
//     is one the state machine accepts. Disconnected nodes never expire here:
//     lost_after is the caller's.
//   - The monitor applies each change it emits to its own view at once, so
//     it never emits the same change twice. A caller whose proposal failed
//     corrects the view with Track (the replicated status), and the monitor
//     decides again at the next Tick.
//   - After BecomeLeader nothing expires and nothing is orphaned for
//     Config.FailoverGrace, and every node gets at least that long to send
//     its first heartbeat to the new leader: a failover never marks the
//     fleet down.
//   - The mass-expiry brake (brake.go): when the nodes expiring now and
//     those expired within the last expiry window reach
//     Config.MassExpiryShare of the fleet (and Config.MassExpiryMin), Tick
//     holds the expiring ones in their status for up to
//     Config.MassExpiryHold: an overloaded or cut-off leader never marks
//     the fleet down either.
//   - A node down for Config.OrphanTimeout yields one ChangeOrphan per down
//     period (and again after a new BecomeLeader, or after OrphanFailed);
//     the caller orphans the node (CmdOrphanNode to every service group:
//     its assigned..running tasks orphaned, its quarantine freed).
//   - New refuses an OrphanTimeout shorter than Config.DownTTL (GraceFactor
//     × MinTTL, the silence after which a node of a small cluster goes
//     down) and a FailoverGrace longer than the OrphanTimeout (ErrConfig).
//   - Heartbeat and a Tick that changes nothing allocate nothing.
package monitor
