// Package route says which Raft group owns a command: the cluster group
// (0) holds nodes and networks, service groups 1..N hold services (by a
// stable hash of the name) and their tasks (a task ID's top 16 bits name its
// group); node and network commands go to the cluster group, whose outbox
// carries them to every service group (its leader's duty re-drives them
// until each group applied them), so mirrors check agent updates and
// service networks without crossing groups.
//
// The one idea: routing is a pure function of the command and the group
// count, shared by the engine (which proposes to dragonboat shards), the
// leader duties' in-memory harness and the API, so all route alike. It sits
// outside engine/ so the API routes without depending on the engine.
package route
