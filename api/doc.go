// Package api is the manager's HTTP server on fasthttp: the user JSON API
// under /v1/, the agent endpoints (wire/ frames under /v1/agent/),
// Prometheus /metrics and, behind a flag, /debug/pprof.
//
// The one idea: translate HTTP into engine commands and reads, and back.
// It holds no task-model rules: every decision is the state machine's, and
// every refusal is the state machine's (or the engine's) error mapped to a
// status code in one table (errors.go). What it renders only reads the
// state: a service's convergence (render.go) summarizes its task counts,
// restart condition and update state, so every client gets one answer.
//
// Contract:
//
//   - Writes are proposed through the engine from whichever replica
//     receives them; reads are answered from this replica's applied state,
//     and every answer carries X-Shoal-Index, the cursor (one applied index
//     per group, as one opaque token) of what it reflects.
//   - Blocking reads: ?index=TOKEN&wait=DURATION on every list and inspect
//     returns once some group applied past its part of TOKEN (or the wait,
//     capped at 5 minutes with a little jitter, ends).
//   - Heartbeats are answered only by the replica that leads the cluster
//     group (it holds them in memory); others answer not_leader with the
//     leader's API address.
//   - Status reports of many agents are coalesced into one proposal per
//     group per flush (at most every FlushInterval or MaxBatch reports).
//   - Bodies are limited (MaxBody); error answers are JSON
//     {"error","code"} whose text speaks to users.
package api
