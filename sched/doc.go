// Package sched is Shoal's vectorized scheduler: it places a whole batch of
// identical tasks in one pass over a columnar table of nodes.
//
// The one idea: a placement decision is a pure function of (node table,
// request, seed), where a Request is a batch of identical tasks of one
// service (called a "group" here before; Shoal's Raft groups are another
// thing). Each stage of Nomad's pipeline runs over the whole batch at
// once instead of once per task:
//
//   - filter: readiness, availability and constraints are set operations on
//     roaring bitmaps over table rows; resource fit and max-replicas turn
//     each remaining row into a room count (how many more tasks it takes);
//   - score: spread preferences split the batch across label values and the
//     default spread water-fills the rows by (tasks of this service, total
//     tasks), which gives exactly what SwarmKit's one-task-at-a-time loop
//     gives, in O(nodes·log(count) + nodes·log(nodes)) instead of
//     O(count·log nodes); bin-pack orders rows by load instead;
//   - select: the per-node counts are committed to the table, so the next
//     request placed in the same run sees the reservations.
//
// A request may name nodes to avoid (the caller's choice: the driver names
// those where the service's tasks kept failing). They are ranked after
// every other node: the batch is placed as if they had no room, and only
// what that leaves over is placed on them, by the same stages. Avoiding
// never changes how many tasks are placed.
//
// Contract:
//
//   - Pure: no I/O, no clock, no goroutines, no global randomness. The
//     package imports no dragonboat, pebble or fasthttp.
//   - Deterministic and replayable: ties are broken by a hash of (seed,
//     service, spec version, node ID or label value), never by row position
//     or map order, so the same nodes, tasks, request and seed give the same
//     placement even when the table was built in a different order.
//   - An avoided node gets a task only if, after the placement, no other
//     node that passes the filters has room for one more.
//   - Place never violates a constraint, a reservation (free CPU and memory
//     of a node never go below zero because of it) or max-replicas-per-node.
//     When not every task fits, it places what fits and returns an
//     *UnplacedError that counts, per reason, why the other nodes refused.
//   - A Table is not safe for concurrent use. Place reuses scratch buffers
//     held by the table, and the slices of the Placement it returns are only
//     valid until the next call to Place (use Placement.Clone to keep them).
package sched
