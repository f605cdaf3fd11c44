// Package ipam keeps the IPv4 address pools of Shoal's networks.
//
// The one idea: an address is never handed to a new holder while an old
// holder may still be using it. An address moves through
//
//	free ──Allocate──▶ held ──Release(node, seq)──▶ quarantined ──ConfirmSync / ExpireNode──▶ free
//	held ──FreeUnassigned (the task never reached a node)──▶ free
//	held as a VIP ──ReleaseVIP (the service was deleted)──▶ free
//
// and only the last arrows return it to the free set. Release does not free:
// it quarantines the address, tagged with the node that ran the holder and the
// node's assignment sequence number at release. The address becomes free again
// only when that node syncs with a sequence number at or above the tag and no
// longer lists the holder (ConfirmSync), or when the node is declared gone for
// good (ExpireNode). A sync collected before the release (an older sequence)
// frees nothing released after it. This is the fix for SwarmKit #2407, where an
// address went back to the pool when the task was deleted from the store and
// was handed to a new task while the old container still held it.
//
// # Contract
//
//   - Pure data structure: no I/O, no clock, no goroutines, no randomness. The
//     same sequence of calls gives the same state and the same MarshalBinary
//     bytes on every replica, so a Pool can live inside a replicated state
//     machine. A Pool is not safe for concurrent use; the caller serialises.
//   - Every usable address (the subnet minus network, broadcast, gateway and
//     configured reserved ranges) is in exactly one of the free, held and
//     quarantined sets: Free()+Held()+Quarantined() == Size().
//   - A held or quarantined address has exactly one holder (a task ID, or a
//     service ID for a VIP); Holder reports it. The pool does not index
//     holders to addresses: the caller records which address it gave a task.
//   - Errors wrap the package sentinels (ErrExhausted, ErrInUse, ...) with %w
//     and name the network, the address and the holder involved.
//
// # Policy choices
//
//   - Subnets are IPv4 only, /8 to /30. The network and broadcast addresses and
//     the gateway (the first usable address unless Config.Gateway says
//     otherwise) are reserved, as are the Config.Reserved ranges.
//   - The subnet is cut into blocks of Config.BlockSize addresses (a power of
//     two, default 64). A block is leased whole to an owner (a service group,
//     ID != 0) so that allocation for one group never touches another group's
//     addresses. Owner 0 means "unleased": it allocates from the blocks no one
//     leases, which is all of them in a pool that never leases. Only a block
//     with no held or quarantined address can be leased or returned.
//   - Allocation order delays reuse: each owner has a rotating cursor, and
//     Allocate takes the first free address of the owner's region after the
//     last address it handed out, wrapping at the end. A freed address behind
//     the cursor comes back only after every free address ahead of it has been
//     used, so a just-freed address is the last candidate, not the first.
//     A specific address (AllocateAddr) does not move the cursor.
//   - VIPs are held addresses of kind KindVIP, tracked per service and freed
//     only by ReleaseVIP, without quarantine: the caller deletes a service (and
//     calls ReleaseVIP) only after its last task is gone.
//   - LeaseBlock picks the lowest-numbered leasable block, so replicas agree.
//
// # Memory
//
// Free, held, quarantined and VIP sets are roaring bitmaps of offsets from the
// network address. Holders live in a table of 256-slot chunks (8 bytes a slot)
// allocated while a chunk has an occupied address, and quarantine tags in a
// per-node list sorted by sequence (16 bytes an entry). A /8 with every other
// address held measures about 16 bytes per held address (see
// BenchmarkFragmentedSlash8Memory).
package ipam
