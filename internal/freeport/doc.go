// Package freeport finds loopback TCP addresses that nothing listens on, for
// tests and for the loadgen's own replicas.
//
// Contract: within one process an address is handed out at most once, and
// the addresses of one call are all held open until every one is chosen. The
// kernel may give a port that was just closed to the next caller, and a
// cluster whose replicas share a Raft address refuses to start, so "listen on
// port 0 and close it" alone is not enough. Another process may still take
// an address between its return and its use; callers that start servers on
// it retry on "address in use".
package freeport
