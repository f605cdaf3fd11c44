// Package agent is Shoal's node agent: it holds a session with the
// managers, heartbeats, follows the node's assignments, runs the tasks
// through an executor, keeps its state in a local store, reports task
// statuses in batches and garbage-collects its own work through a jittered,
// fenced sync.
//
// It is a pure machine plus a thin runner (STYLE habit 13):
//
//   - Step (step.go) is the task lifecycle every executor follows: (state,
//     desired, operation in flight, observation) → (next state, next
//     operation). It is pure and shared by the process executor and the
//     simulated one.
//   - Machine (machine.go, machine_status.go) holds the assignment set with
//     its cursor and per-group sequence numbers, every held task and the
//     statuses owed to the manager. It does no I/O and reads no clock; what
//     must happen comes out of Ready as data: store writes, then executor
//     actions.
//   - Agent (runner*.go) holds the Clock, the Manager, the Executor and the
//     Store and runs five loops: session and heartbeats, assignments,
//     status reports, sync, executor events.
//
// Contract with the managers (shared/DESIGN.md): heartbeats at the period
// the manager returns ±10 %, brought forward to within a tenth of it when
// another call lost its connection or a poll answer names a new cluster
// leader; after a lost session the first reconnect is
// spread uniformly over one period, later ones back off exponentially with
// full jitter and a floor of one period, never sooner than Retry-After;
// after every (re)connect the agent heartbeats first, then sends the
// statuses the manager has not acknowledged, then a re-report marker
// listing every held task (even when nothing was owed); the same again on a
// session whose heartbeat is answered with the node initializing (the
// session outlived a disconnect). Assignments are a
// long-poll from the persisted cursor (an answer that comes after the poll's
// session ended is dropped and asked again on the live session, which sends
// every spec its frames need); COMPLETE (or resync) replaces the set,
// and every task missing from it is stopped and forgotten; an INCREMENTAL
// that does not follow the cursor, or that names a task to start whose
// spec the agent was never sent, is refused and a COMPLETE asked for.
// Statuses: the
// latest per task; state changes go 200 ms after the last send, anything
// else 1 s after it, and a failed send waits a full second; ReportRetry
// leaves a status owed, ReportRejected drops it. Sync every interval ±50 %
// with the last applied sequences and every held task; what the answer
// lists is stopped and forgotten. A task whose desired state is shutdown or
// remove is never started or resumed; after an agent restart nothing is
// prepared or started until the manager has sent a frame.
//
// Executors: ProcessExecutor runs each task in its own process group with
// its stdout and stderr in size-capped files under the data directory, and
// re-attaches after an agent restart by pid and start time (field 22 of
// /proc/PID/stat); processes marked with the data directory that no held
// task claims are killed. SimExecutor follows seeded stage tables (delay,
// jitter, weighted outcomes) on the clock, for the loadgen.
//
// Task output on request (logsend.go, docs/logs.md): a log subscription
// handed over in an assignments answer is served once per ID (new tasks of
// a known subscription are served too): the agent reads the files its
// executor keeps (an OutputKeeper) and posts the lines to the manager the
// subscription names (through a LogPublisher), at most 64 subscriptions at
// once, until every line is sent or, when it follows, until that manager
// answers stop or stays unreachable for 30 s. It sends only its own
// tasks' output.
//
// Stores and durability: MemStore (tests, simulated agents) and PebbleStore
// (the pebble that dragonboat pins). The node ID is written with Sync. Other
// writes are synced only when they carry something only the agent knows — a
// new observed status (an exit code) or a process identity. Acknowledged
// statuses are written NoSync: they record what the manager already has,
// and losing one in a crash costs one duplicate report, which the manager
// accepts as a resend (a lower-or-equal rank is acknowledged, not applied).
// Pebble keeps the write-ahead log in order, so a crash loses a suffix of
// writes, never one in the middle, and every status was synced before an
// acknowledgement of it was written. Syncing acknowledgements would cost
// one fsync per status batch for nothing (BenchmarkPebbleAckedStatuses
// measures both).
//
// The agent imports wire/, the statemachine enums and IDs, internal/clock,
// internal/procstat, internal/varint and pebble; never engine/ nor
// fasthttp, directly or transitively (the root deps_test.go).
package agent
