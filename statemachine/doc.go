// Package statemachine holds Shoal's replicated state and its deterministic
// apply function.
//
// The one idea: the whole control-plane state (services, tasks, nodes,
// networks) changes only through Apply, a pure function of (state, batch of
// commands, Raft index, time). Apply never reads the wall clock, performs no
// I/O and starts no goroutines; time and the index arrive inside the Raft
// entry. One batch may carry thousands of commands, and each command succeeds
// or is rejected on its own: a rejected command never rejects its batch.
//
// Contract:
//
//   - The task lifecycle of DESIGN.md is enforced per transition: a task's
//     observed state only ever moves to a higher rank, and only the component
//     that owns a transition may make it (see CanTransition). Every applied
//     transition records its component in the task's bounded history.
//   - Orchestrator, allocator and reaper reactions run inside Apply after the
//     batch's commands, until they leave nothing to do (a build with -tags
//     shoal_invariants panics if they stop short), unless
//     Config.ManualReactions is set, in which case they are explicit
//     commands — the model checker uses that to interleave them with
//     everything else.
//   - Tasks are never deleted before their shutdown is confirmed: the reaper
//     deletes only what DESIGN.md allows.
//   - Replays are harmless: an entry whose index is at or below the last
//     applied index changes nothing.
//   - The cluster group is the source of truth for nodes, networks and
//     address-block leases: what it applies of them it appends to its
//     outbox, which service groups apply entry by entry, exactly once and in
//     order (CmdDeliver); blocks are leased to service groups on demand and
//     given back when empty (outbox.go, lease.go), so an address is held in
//     one group at a time.
//   - Cluster settings that Apply reads (the task history limit) are
//     replicated state, never a replica's configuration: the cluster group
//     applies CmdSetClusterSettings and its outbox carries it to every
//     service group, like a node change (settings.go).
//   - Save/Load round-trip the whole state (zstd-compressed canonical
//     encoding); Hash is a digest of that canonical encoding, so equal hashes
//     mean equal states. Load and DecodeBatch return errors on corrupt input,
//     never panic. CaptureSnapshot captures the state at one entry and
//     SaveStream writes Save's bytes for it while entries go on applying
//     (snapshot_stream.go): a task changed before it is written keeps its
//     encoding from the capture first (keepTask).
package statemachine
