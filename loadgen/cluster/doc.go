// Package cluster gives the loadgen its managers: three (or N) `shoal
// serve` child processes of a shoal binary on free loopback ports, or an
// existing cluster to join; it finds the leader, kills a replica with
// SIGKILL and restarts it from its data, scrapes each replica's /metrics
// and fetches its pprof profiles.
//
// The one idea: the loadgen sees managers only as processes and HTTP
// endpoints, like an operator; it never links the engine.
//
// Children die with the loadgen (SIGKILL through Pdeathsig if the loadgen
// itself is killed; Close otherwise). Their output goes to
// DATA-DIR/mN.log.
package cluster
