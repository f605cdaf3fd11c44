// Package cluster is the vocabulary a caller of the replicated cluster
// shares with the parts that answer it: the sentinel errors the engine, the
// leader duties and the node monitor return, and the plain values they
// report (a replica's contact with a group's quorum, a group's members).
//
// The one idea: a caller such as the API matches an answer with errors.Is
// and reads these values without importing the engine, its Raft library or
// the duties. Those packages return these very variables (engine.ErrTimeout
// is cluster.ErrTimeout), so errors.Is holds on either name. Pure: data
// only.
package cluster
