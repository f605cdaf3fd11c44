package ipam

import (
	"cmp"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
)

// Limits on Config fields.
const (
	// MinPrefixBits is the largest subnet a pool accepts (/8, 16,777,216 addresses).
	MinPrefixBits = 8
	// MaxPrefixBits is the smallest subnet a pool accepts (/30, one usable address).
	MaxPrefixBits = 30
	// DefaultBlockSize is the block size, in addresses, when Config.BlockSize is 0.
	DefaultBlockSize = 64
	// MinBlockSize is the smallest block size, in addresses: a block of one
	// address lets a small network be lent out address by address.
	MinBlockSize = 1
	// MaxNameLen is the longest Config.Name, in bytes.
	MaxNameLen = 255
)

// Range is an inclusive range of IPv4 addresses, First through Last.
type Range struct {
	First, Last netip.Addr
}

// String formats the range as "first-last".
func (r Range) String() string { return r.First.String() + "-" + r.Last.String() }

// Config describes one network's pool. Only Subnet is required.
type Config struct {
	// Name names the network in error messages. Default: empty, messages
	// then name the subnet alone. At most MaxNameLen bytes.
	Name string
	// Subnet is the network's IPv4 prefix, /8 to /30, host bits clear.
	Subnet netip.Prefix
	// Gateway is the gateway address, reserved. Default (the zero Addr): the
	// first address after the network address. It must be inside Subnet and
	// be neither the network nor the broadcast address.
	Gateway netip.Addr
	// Reserved lists address ranges never allocated, each inside Subnet.
	// Default: none. Overlapping or adjacent ranges are merged.
	Reserved []Range
	// BlockSize is the number of addresses in a leasable block, a power of
	// two of at least MinBlockSize. Default (0): DefaultBlockSize. A block
	// size above the subnet size is capped to it (one block).
	BlockSize uint32
}

// ValidateSubnet reports, wrapping ErrInvalidCIDR, why p cannot be a pool's
// subnet: not IPv4, outside /8../30, or host bits set.
func ValidateSubnet(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%w: %q is not a valid prefix; write it as a.b.c.d/n", ErrInvalidCIDR, p.String())
	case !p.Addr().Is4():
		return fmt.Errorf("%w: %s is IPv6; networks are IPv4 only", ErrInvalidCIDR, p)
	case p.Bits() > MaxPrefixBits:
		return fmt.Errorf("%w: %s is too small: /31 and /32 leave no address after network, broadcast and gateway; use /%d or larger",
			ErrInvalidCIDR, p, MaxPrefixBits)
	case p.Bits() < MinPrefixBits:
		return fmt.Errorf("%w: %s is too large; use /%d or smaller", ErrInvalidCIDR, p, MinPrefixBits)
	case p.Masked() != p:
		return fmt.Errorf("%w: %s has host bits set; did you mean %s?", ErrInvalidCIDR, p, p.Masked())
	}
	return nil
}

// CheckOverlap returns nil if next is a valid subnet (ValidateSubnet) that
// overlaps none of existing, and otherwise an error wrapping ErrInvalidCIDR
// or ErrOverlap that names the first conflicting subnet. Invalid entries of
// existing are ignored.
func CheckOverlap(existing []netip.Prefix, next netip.Prefix) error {
	if err := ValidateSubnet(next); err != nil {
		return err
	}
	for _, e := range existing {
		if e.IsValid() && e.Overlaps(next) {
			return fmt.Errorf("%w: %s overlaps existing network %s; choose a disjoint subnet", ErrOverlap, next, e)
		}
	}
	return nil
}

// layout is the validated, normalised form of a Config in offsets from the
// network address.
type layout struct {
	cfg        Config // normalised: Gateway set, Reserved merged and sorted, BlockSize effective
	base       uint32 // network address
	size       uint32 // addresses in the subnet, 4 .. 1<<24
	blockShift uint8  // log2(block size)
	gateway    uint32 // offset
	ranges     [][2]uint32
}

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func u32Addr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// newLayout validates c and computes its layout.
func newLayout(c Config) (layout, error) {
	if err := ValidateSubnet(c.Subnet); err != nil {
		return layout{}, err
	}
	if len(c.Name) > MaxNameLen {
		return layout{}, fmt.Errorf("%w: name is %d bytes, at most %d allowed", ErrInvalidConfig, len(c.Name), MaxNameLen)
	}
	l := layout{base: addrU32(c.Subnet.Addr()), size: 1 << (32 - c.Subnet.Bits())}
	label := c.Subnet.String()
	if c.Name != "" {
		label = fmt.Sprintf("%q (%s)", c.Name, c.Subnet)
	}
	inside := func(a netip.Addr, what string) (uint32, error) {
		if !a.Is4() || !c.Subnet.Contains(a) {
			return 0, fmt.Errorf("%w: %s %s is not in network %s", ErrOutsideSubnet, what, a, label)
		}
		return addrU32(a) - l.base, nil
	}

	bs := c.BlockSize
	if bs == 0 {
		bs = DefaultBlockSize
	}
	if bs < MinBlockSize || bits.OnesCount32(bs) != 1 {
		return layout{}, fmt.Errorf("%w: block size %d must be a power of two of at least %d", ErrInvalidConfig, bs, MinBlockSize)
	}
	bs = min(bs, l.size)
	l.blockShift = uint8(bits.TrailingZeros32(bs))

	l.gateway = 1
	if c.Gateway.IsValid() {
		off, err := inside(c.Gateway, "gateway")
		if err != nil {
			return layout{}, err
		}
		if off == 0 || off == l.size-1 {
			return layout{}, fmt.Errorf("%w: gateway %s is the network or broadcast address of %s", ErrInvalidConfig, c.Gateway, label)
		}
		l.gateway = off
	}

	for _, r := range c.Reserved {
		first, err := inside(r.First, "reserved range start")
		if err != nil {
			return layout{}, err
		}
		last, err := inside(r.Last, "reserved range end")
		if err != nil {
			return layout{}, err
		}
		if first > last {
			return layout{}, fmt.Errorf("%w: reserved range %s ends before it starts", ErrInvalidConfig, r)
		}
		l.ranges = append(l.ranges, [2]uint32{first, last})
	}
	slices.SortFunc(l.ranges, func(a, b [2]uint32) int { return cmp.Compare(a[0], b[0]) })
	merged := l.ranges[:0]
	for _, r := range l.ranges {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	l.ranges = merged

	l.cfg = Config{
		Name:      c.Name,
		Subnet:    c.Subnet,
		Gateway:   u32Addr(l.base + l.gateway),
		BlockSize: bs,
	}
	for _, r := range l.ranges {
		l.cfg.Reserved = append(l.cfg.Reserved, Range{u32Addr(l.base + r[0]), u32Addr(l.base + r[1])})
	}
	return l, nil
}
