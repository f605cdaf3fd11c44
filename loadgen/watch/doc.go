// Package watch follows a cluster's event stream (GET /v1/events) like a
// user: from a start index, moving to another manager when one goes away
// and resuming from the last event's index there; when no manager keeps
// events back that far, it reads the whole task list again (a resync) and
// follows from that list's index.
//
// The one idea: the loadgen's view of the cluster comes from one ordered
// stream, fed to sinks (the invariant checker, the statistics); a sink is
// told the connection number so it knows which objects came from the same
// replica.
package watch
