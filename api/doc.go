// Package api is the manager's HTTP server on fasthttp: the user JSON API
// under /v1/, the agent endpoints under /v1/agent/ (wire/ frames, or the
// same messages in JSON; dialect.go), Prometheus /metrics and, behind a
// flag, /debug/pprof.
//
// The one idea: translate HTTP into engine commands and reads, and back.
// It holds no task-model rules: every decision is the state machine's, and
// every refusal is the state machine's (or the engine's) error mapped to a
// status code in one table (errors.go). What it renders only reads the
// state: a service's convergence (render.go) summarizes its task counts,
// restart condition and update state, so every client gets one answer.
// The agent protocol's decisions are shoal/manager/control's: the agent
// endpoints (agent.go, assign.go, report.go) decode, check the caller
// (and that a status batch names only its own tasks), hold the session
// setup slots, and encode around control.Agents — node registration and
// sessions, heartbeats, the assignment stream (journal, feed, cursors,
// resync, spec dedup, COMPLETE after the read barrier), status
// submission and the sync fan-out. The event stream (events.go) pages the
// same control.Feed; a change's render (its object as this replica has it)
// is made once per change and group state and shared by every open stream
// that reads it at that state, each writing only its own resume token in
// front (eventlines.go).
//
// It sees the engine and the leader duties only through narrow interfaces
// declared beside the handlers that use them (Reader in read.go, Leaders
// in quorum.go, Self in status.go, Replicas in replicas.go, RaftStats in
// metrics.go, GroupSubmitter in report.go, Monitor in agent.go, Placement
// in tasks.go, Submitter in server.go), and matches their errors by
// package cluster's sentinels: it imports nothing under engine/, and
// manager.Start wires the engine and the duties in.
//
// Contract:
//
//   - Writes are proposed through the engine from whichever replica
//     receives them; reads are answered from this replica's applied state
//     (with ?consistent=true only once it applied everything each group had
//     committed, 503 without a quorum), say how stale they may be
//     (X-Shoal-Known-Leader, X-Shoal-Last-Contact), and carry X-Shoal-Index,
//     the cursor (one applied index per group, as one opaque token) of what
//     they reflect.
//   - Blocking reads: ?index=TOKEN&wait=DURATION on every list and inspect
//     returns once some group applied past its part of TOKEN (or the wait,
//     capped at 5 minutes with a little jitter, ends).
//   - Heartbeats are recorded only by the replica that leads the cluster
//     group (it holds them in memory). Any replica takes an agent's
//     heartbeat: a follower relays it to the leader, batched with others
//     (manager/control's relay; relay.go carries the batches on POST
//     /v1/heartbeats/peer, managers only), and answers what the leader
//     answered; where it cannot, not_leader with the leader's API address
//     (unavailable when it knows no leader).
//   - Status reports of many agents share Raft entries: each request is
//     submitted as it comes, and the engine's proposer puts whatever is
//     queued for a group into its next entry (engine.Config's
//     MaxBatchRecords and MaxBatchBytes bound one entry).
//   - Bodies are limited (MaxBody); error answers are JSON
//     {"error","code"} (a wire Error in the agent's dialect on the agent
//     endpoints) whose text speaks to users.
package api
