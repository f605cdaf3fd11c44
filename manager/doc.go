// Package manager runs one manager replica: the replicated engine, the
// leader duties (scheduler driver, node monitor, timers) and the HTTP API,
// wired together.
//
// The one idea: what `shoal serve` starts, as a value that tests can start
// several of in one process on free loopback ports.
//
// Contract: Start binds the API address before it opens the data
// directory, so a port in use is refused before anything is written; Close
// stops the API first, then the engine. Register records the replica's API
// address in the cluster group (redirects, the agents' manager list).
package manager
