// Package duty holds the leader-only loops of a Shoal manager: the
// scheduler driver (pending tasks → sched.Place → CmdAssign), the node
// monitor duty (heartbeats → node status changes and orphaning), the
// timer duty (CmdTick to service groups whose timers are due) and the
// outbox duty (the cluster group's outbox re-driven into every service
// group; address-block requests, grants and returns between them).
//
// The one idea: a duty is a loop over a narrow Cluster interface — read a
// group's applied state, submit commands, count the groups — and a Clock.
// It knows nothing of Raft: in production *engine.Engine provides the
// Cluster under a Submitter (manager.Start builds it and the duties over
// it), and Memory — N statemachine.States, an index counter and a
// clock.Fake — provides it in tests and scenario scripts, as etcd raft's
// RawNode is driven by its InteractionEnv. This package never imports the
// engine.
//
// Contract:
//
//   - The decisions are value functions, table-tested without any loop:
//     the driver's scan (states → node table + pending batches; with a
//     Tracker kept between runs and corrected by the tasks the applied
//     entries touched, checked against the full scan by a property test),
//     plan
//     (table + batches + seed → assignments + reasons) and pending reasons
//     (plan + the message each pending task carries → CmdPendingReason
//     only where it changed), the monitor's
//     heartbeat table (shoal/engine/monitor), the timer duty's due check.
//   - Submissions of node and network commands go through a Submitter
//     (or Memory): a removal is first checked with every service group
//     (Precheck), and a change the cluster group applied reaches every
//     service group (Deliveries) before the submission returns, unless the
//     caller asked for SubmitBeforeFanout; the outbox duty re-drives what
//     a crash cut short.
//   - The scheduler driver ranks a node last for a service's spec version
//     once DefaultFailureLimit of its tasks ended rejected or failed there
//     within DefaultFailureWindow (failures.go). Those counts are the
//     leader's soft state, never replicated: a new leader starts without
//     them and relearns what the groups' retained task history holds at
//     its first scan. Losing the rest on failover is accepted: it costs a
//     few more tries on the failing node, never a placement.
//   - The loops hold no lock across a submission: a run's observable
//     results (LastRun, Unschedulable, NodeStatus) are published under a
//     short lock; a heartbeat never waits for a tick's round trip.
//   - Anything that waits uses the Clock (shoal/internal/clock's); tests
//     advance a clock.Fake and call RunOnce / Tick directly, or wait for a
//     loop with clock.Fake.BlockUntil, never sleep.
//   - Every Run returns promptly when its context ends (leadership lost).
package duty
