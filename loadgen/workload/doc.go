// Package workload is what the loadgen asks of the cluster through the
// user API: a seeded plan (networks sized so that addresses are reused,
// services whose replicas add up to the task target) and a driver that
// creates it, churns it (scale up and down, rolling updates, removal and
// re-creation) and restores it to the plan for quiescence.
//
// The one idea: the workload is a function of the seed — the same --seed
// gives the same networks, services and sequence of operations (not the
// same timing) — and it sees the cluster only through api/client, retrying
// on another manager when one is unreachable.
package workload
