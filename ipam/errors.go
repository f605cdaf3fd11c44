package ipam

import "errors"

// Sentinel errors. Every error returned by this package wraps one or more of
// them (match with errors.Is) and adds the network, address and holder
// involved. Their text reaches users as it is (a refused network, a task
// waiting for an address), so it names no package.
var (
	// ErrExhausted: no free address is left in the owner's region (or, wrapped
	// by ErrNoFreeBlock, no block is left to lease). The message names the
	// network and the held and quarantined counts. A caller with a leasing
	// owner may lease another block (LeaseBlock); a user waits for
	// quarantined addresses to be confirmed or grows the subnet.
	ErrExhausted = errors.New("pool exhausted")
	// ErrInvalidCIDR: the subnet is not an IPv4 prefix between /8 and /30
	// with its host bits clear.
	ErrInvalidCIDR = errors.New("invalid CIDR")
	// ErrOutsideSubnet: an address (or reserved range, or gateway) is not in
	// the pool's subnet.
	ErrOutsideSubnet = errors.New("address outside subnet")
	// ErrInUse: the requested address is held by another holder.
	ErrInUse = errors.New("address in use")
	// ErrQuarantined: the requested address was released and its node has not
	// confirmed it gone yet.
	ErrQuarantined = errors.New("address quarantined")
	// ErrReserved: the requested address is the network, broadcast or gateway
	// address or in a reserved range.
	ErrReserved = errors.New("address reserved")
	// ErrOverlap: a new subnet overlaps an existing one.
	ErrOverlap = errors.New("overlapping subnets")
	// ErrNotHeld: the address is not held by the holder named in the call
	// (it is free, quarantined, a VIP, or held by someone else).
	ErrNotHeld = errors.New("address not held")
	// ErrInvalidConfig: a Config field is out of range (block size, reserved
	// range order, gateway position, name length).
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidID: holder, service or owner ID 0 where a real ID is needed.
	ErrInvalidID = errors.New("invalid id")
	// ErrNoFreeBlock: every block is leased or in use; it also matches
	// ErrExhausted.
	ErrNoFreeBlock = errors.New("no free block")
	// ErrInvalidBlock: the block index is past the subnet or the block has no
	// usable address.
	ErrInvalidBlock = errors.New("invalid block")
	// ErrBlockInUse: the block is leased to someone else, or still has held
	// or quarantined addresses.
	ErrBlockInUse = errors.New("block in use")
	// ErrNotLeased: the block (or the block of the requested address) is not
	// leased to the calling owner.
	ErrNotLeased = errors.New("block not leased to owner")
	// ErrCorrupt: UnmarshalBinary input is truncated or inconsistent.
	ErrCorrupt = errors.New("corrupt pool encoding")
)
