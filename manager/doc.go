// Package manager runs one manager replica: the replicated engine, the
// leader duties (scheduler driver, node monitor, timers) and the HTTP API,
// wired together, and the replica's whole life as `shoal serve` runs it.
//
// The one idea: what `shoal serve` starts, as a value that tests can start
// several of in one process on free loopback ports (Start), and the serve
// lifecycle around it (Serve), so the command holds only flags and output.
//
// Contract:
//
//   - Start opens the engine (a restarting replica replays its log first),
//     then binds the API address, so connections are refused rather than
//     queued while the log replays; an API address in use fails Start after
//     the engine opened. Close stops the API first, then the engine.
//   - Register records the replica's API address in the cluster group
//     (redirects, the agents' manager list).
//   - Serve, on a data directory without TLS material, checks the options
//     and that the API address is free before it writes anything: then it
//     creates the cluster CA (the first replica) or obtains the replica's
//     certificate from a running manager with the join token. A replica
//     joining without peers is added to every group's membership before
//     it starts. Ready means every group has a leader and Register
//     succeeded. At stop it hands the groups it leads to a caught-up peer
//     (at most 3s) and reports each group's last index and hash. Progress
//     reaches the caller as lines (ServeOptions.Say), never on stdout.
package manager
