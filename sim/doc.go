// Package sim is a deterministic simulation of the whole system, in the
// manner of etcd raft's InteractionEnv and the simulation testing of
// FoundationDB and TigerBeetle: the replicated groups, the leader duties,
// the manager's protocols (manager/control), real agents and a network,
// all in one loop on one simulated clock, scripted or driven by a seed.
//
// The one idea: everything that happens is a timer on the simulation's
// clock (Clock), fired in order on the loop's goroutine, so a seed
// replays a run exactly, and the run is checked by the loadgen's own
// checker (loadgen/check) fed what the API would render.
//
// What runs:
//
//   - the groups: engine/duty's Memory is the log and the leader's state;
//     each of the manager replicas applies the log into its own states,
//     each entry a while after its commit (its lag, per group, drawn from
//     the seed), and restarts from a snapshot of its state (crash);
//   - the leader duties over Memory (scheduler driver, node monitor,
//     timers, outbox), ticked by the clock, restarted at a leader change;
//   - on every replica, control.Agents (sessions, heartbeats, the
//     assignment stream with its own change feed fed by that replica's
//     applies, status submission, the sync fan-out) over that replica's
//     view: its local reads are its own states, a linearizable read or a
//     commit it waits for first catches it up. A long poll is asked
//     without waiting and parked by the loop;
//   - agents: real agent.Machines with the simulated executor (stepped:
//     no goroutine) and an in-memory store, driven as agent.Agent's loops
//     drive them (a session, a heartbeat first, the long poll, status
//     batches with the re-report marker on every session, jittered
//     syncs), each loop a timer; or role-played agents, whose every
//     message is a script's directive (role.go);
//   - the network between agents and replicas: each call goes to a
//     replica the seed chooses (heartbeats and re-reports to the leader),
//     each message is delayed, dropped or duplicated with the odds set by
//     "deliver", and a partitioned agent's messages are lost both ways.
//
// Contract:
//
//   - Determinism: a World's behaviour is a function of its Config and
//     the directives run. Nothing runs on another goroutine: control's
//     Agents visit the groups in order (AgentsConfig.Sequential), the
//     executor is stepped, every timer fires on the loop. The world's
//     random draws are keyed by the simulated instant they are made at
//     (the seed, the time, the draws before at that time), so a directive
//     removed from a run leaves the other instants' draws as they were.
//   - The checker is fed what a user and the agents see: every task
//     change the event stream's replica applies, rendered as the API
//     renders it (api.RenderTask), and every node change as it renders
//     that (api.RenderNode); what each agent is handed; which
//     addresses each agent's executor holds (prepare to forget); suspects
//     settled by reads of the leader's state; at "stabilize", quiescence
//     (one-per-slot, as-desired) and the replicas' state hashes
//     (replicas-agree). No check is written for the simulation.
//   - Bounds the design sets, not bugs: an agent silent for MaxSilence
//     is healed (the monitor frees a silent node's addresses past the
//     orphan timeout, whatever its agent runs); a replica restored from a
//     snapshot keeps no seeded bug of the state machine, so runs planting
//     one never restore one (the agent protocol's are planted again).
//   - Generate turns a seed into directives (a workload and faults), RunOps
//     runs them and stops at the first violation, Shrink cuts prefixes,
//     removes and moves directives while the run still breaks the same
//     invariant (the same result on any number of cores), Script prints a
//     run as a datadriven script with its output. Quiescence
//     ("stabilize": settled, then the quiescence checks) is quiesce.go's.
//
// The dialect is World.Do's; docs/sim.md shows how to run, replay and
// shrink.
package sim
