// Package loadgen is `shoal loadgen`: it starts (or joins) a cluster of
// managers, runs thousands of simulated agents against it over loopback
// HTTP, drives a seeded workload through phases — ramp, churn, faults
// (agent disconnects and kill -9-style vanishes, leader kills), quiesce —
// checks the task model's invariants online from the event stream and the
// agents' own view, shows progress, and writes a report.
//
// The one idea: the cluster is judged like a user would judge it, only
// through its API, its event stream and its agents. loadgen/ never imports
// engine/ or manager/, directly or transitively (the walls of the root
// deps_test.go); the managers are `shoal serve` child processes.
//
// Sub-packages, one idea each: cluster (the manager processes, /metrics,
// pprof), fleet (the simulated agents and their faults), watch (the
// resumable event stream), check (the invariant checker, a pure value),
// workload (the seeded plan and the API calls), report (the JSON schema).
//
// With --fleet-workers the loadgen is the coordinator of fleet workers on
// other hosts (`shoal loadgen fleet`; docs/loadgen-fleet.md): it keeps the
// workload, the stream, the checks and the report, and the workers run
// the agents; the single-machine run is unchanged without it.
//
// A run is bounded: every phase has a duration or a timeout, and Run
// returns when the last one ends (or its context does). The exit status of
// `shoal loadgen` is non-zero when an invariant was violated, the cluster
// did not converge, or a --threshold failed.
package loadgen
