package ipam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"shoal/internal/varint"
)

// Encoding, version 1. Integers are unsigned varints unless noted.
//
//	"IPAM" 0x01
//	subnet: 4 address bytes, 1 prefix-length byte
//	name: length, bytes
//	gateway offset; block shift (1 byte)
//	reserved ranges: count, then (first offset, last-first) ascending
//	leases: count, then (block, owner) by ascending block
//	cursors: owner 0's cursor; count, then (owner, cursor) by ascending owner
//	held set, VIP set: length, roaring serialisation after RunOptimize
//	holders of held addresses, in ascending address order
//	quarantine: node count, then by ascending node: node, entry count,
//	  entries (seq, offset, holder) by ascending (seq, offset)
//
// Free sets, counts, block use and per-service VIP lists are derived, so the
// same state always gives the same bytes.
const (
	encMagic   = "IPAM"
	encVersion = 1
)

// MarshalBinary encodes the pool. Equal states give equal bytes.
func (p *Pool) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 256)
	b = append(b, encMagic...)
	b = append(b, encVersion)
	a4 := p.cfg.Subnet.Addr().As4()
	b = append(b, a4[:]...)
	b = append(b, byte(p.cfg.Subnet.Bits()))
	b = binary.AppendUvarint(b, uint64(len(p.cfg.Name)))
	b = append(b, p.cfg.Name...)
	b = binary.AppendUvarint(b, uint64(p.gateway))
	b = append(b, p.blockShift)
	b = binary.AppendUvarint(b, uint64(len(p.ranges)))
	for _, r := range p.ranges {
		b = binary.AppendUvarint(b, uint64(r[0]))
		b = binary.AppendUvarint(b, uint64(r[1]-r[0]))
	}

	leased := 0
	for _, o := range p.blockOwner.v {
		if o != 0 {
			leased++
		}
	}
	b = binary.AppendUvarint(b, uint64(leased))
	for blk, o := range p.blockOwner.v {
		if o != 0 {
			b = binary.AppendUvarint(b, uint64(blk))
			b = binary.AppendUvarint(b, uint64(o))
		}
	}

	b = binary.AppendUvarint(b, uint64(p.unleased.next))
	owners := make([]uint32, 0, len(p.owners))
	for o := range p.owners {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	b = binary.AppendUvarint(b, uint64(len(owners)))
	for _, o := range owners {
		b = binary.AppendUvarint(b, uint64(o))
		b = binary.AppendUvarint(b, uint64(p.owners[o].next))
	}

	for _, bm := range []*roaring.Bitmap{p.held, p.vips} {
		c := bm.Clone()
		c.RunOptimize()
		data, err := c.ToBytes()
		if err != nil {
			return nil, fmt.Errorf("ipam: encode network %s: %w", p.label(), err)
		}
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = append(b, data...)
	}
	it := p.held.Iterator()
	for it.HasNext() {
		b = binary.AppendUvarint(b, p.holders.get(it.Next()))
	}

	b = binary.AppendUvarint(b, uint64(len(p.nodes)))
	for _, n := range p.QuarantineNodes() {
		q := p.nodes[n]
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(q.entries)))
		for _, e := range q.entries {
			b = binary.AppendUvarint(b, e.seq)
			b = binary.AppendUvarint(b, uint64(e.off))
			b = binary.AppendUvarint(b, p.holders.get(e.off))
		}
	}
	return b, nil
}

// decoder reads the encoding: shoal/internal/varint's bounded reader (the
// first failure sticks and wraps ErrCorrupt) with this package's names.
type decoder struct{ varint.Reader }

func (d *decoder) fail(format string, args ...any)   { d.Fail(format, args...) }
func (d *decoder) take(n uint64, what string) []byte { return d.Take(n, what) }
func (d *decoder) uvarint(what string) uint64        { return d.Uvarint(what) }

// bounded reads a varint that must be <= limit.
func (d *decoder) bounded(limit uint64, what string) uint64 { return d.Bounded(limit, what) }

// count reads an element count, bounded by the bytes left (each element
// takes at least one byte) so a corrupt count cannot force a huge allocation.
func (d *decoder) count(what string) int { return d.Count(1, what) }

func (d *decoder) bitmap(what string) *roaring.Bitmap {
	data := d.take(uint64(d.count(what+" length")), what)
	if d.Err() != nil {
		return nil
	}
	bm := roaring.New()
	n, err := bm.ReadFrom(bytes.NewReader(data))
	if err == nil && n != int64(len(data)) {
		err = fmt.Errorf("%d trailing bytes", int64(len(data))-n)
	}
	if err == nil {
		err = bm.Validate()
	}
	if err != nil {
		d.fail("%s: %w", what, err)
		return nil
	}
	return bm
}

// UnmarshalBinary replaces p with the decoded pool. Corrupt or truncated
// input returns an error wrapping ErrCorrupt and leaves p unchanged.
func (p *Pool) UnmarshalBinary(data []byte) error {
	d := &decoder{varint.NewReader(data, ErrCorrupt)}
	q := d.decode()
	if d.Err() != nil {
		return d.Err()
	}
	*p = *q
	return nil
}

func (d *decoder) decode() *Pool {
	if string(d.take(uint64(len(encMagic)), "magic")) != encMagic {
		d.fail("bad magic")
		return nil
	}
	if v := d.take(1, "version"); d.Err() == nil && v[0] != encVersion {
		d.fail("unknown version %d", v[0])
	}
	sub := d.take(5, "subnet")
	if d.Err() != nil {
		return nil
	}
	var c Config
	c.Subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte(sub[:4])), int(sub[4]))
	if err := ValidateSubnet(c.Subnet); err != nil {
		d.fail("%w", err)
		return nil
	}
	size := uint64(1) << (32 - c.Subnet.Bits())
	base := addrU32(c.Subnet.Addr())
	c.Name = string(d.take(d.bounded(MaxNameLen, "name length"), "name"))
	c.Gateway = u32Addr(base + uint32(d.bounded(size-1, "gateway")))
	shift := d.take(1, "block shift")
	if d.Err() != nil {
		return nil
	}
	if uint64(1)<<min(shift[0], 32) > size {
		d.fail("block shift %d too large", shift[0])
		return nil
	}
	c.BlockSize = 1 << shift[0]
	nr := d.count("reserved count")
	for range nr {
		first := d.bounded(size-1, "reserved start")
		last := first + d.bounded(size-1-first, "reserved length")
		c.Reserved = append(c.Reserved, Range{u32Addr(base + uint32(first)), u32Addr(base + uint32(last))})
	}
	if d.Err() != nil {
		return nil
	}
	p, err := New(c)
	if err != nil {
		d.fail("%w", err)
		return nil
	}
	if p.blockShift != shift[0] {
		d.fail("block shift %d is not canonical", shift[0])
		return nil
	}

	nl := d.count("lease count")
	next := uint64(0)
	for range nl {
		b := d.bounded(uint64(p.NumBlocks()-1), "leased block")
		o := d.bounded(1<<32-1, "lease owner")
		switch {
		case d.Err() != nil:
			return nil
		case b < next:
			d.fail("leased blocks out of order")
			return nil
		case o == 0 || !p.leasable.Contains(uint32(b)):
			d.fail("lease of block %d to owner %d is invalid", b, o)
			return nil
		}
		p.lease(BlockID(b), uint32(o))
		next = b + 1
	}

	p.unleased.next = uint32(d.bounded(size, "cursor"))
	if no := d.count("cursor count"); d.Err() == nil && no != len(p.owners) {
		d.fail("%d cursors for %d owners", no, len(p.owners))
	}
	prev := int64(-1)
	for range len(p.owners) {
		o := d.bounded(1<<32-1, "cursor owner")
		cur := d.bounded(size, "cursor")
		os := p.owners[uint32(o)]
		if d.Err() != nil || int64(o) <= prev || os == nil {
			d.fail("cursor for owner %d is invalid", o)
			return nil
		}
		os.next = uint32(cur)
		prev = int64(o)
	}

	held := d.bitmap("held set")
	vips := d.bitmap("vip set")
	if d.Err() != nil {
		return nil
	}
	switch {
	case !held.IsEmpty() && uint64(held.Maximum()) >= size:
		d.fail("held address past the subnet")
	case held.Intersects(p.reserved):
		d.fail("reserved address held")
	case vips.AndCardinality(held) != vips.GetCardinality():
		d.fail("vip not held")
	}
	if d.Err() != nil {
		return nil
	}
	it := held.Iterator()
	for it.HasNext() {
		off := it.Next()
		id := d.uvarint("holder")
		if d.Err() != nil || id == 0 {
			d.fail("holder of offset %d is invalid", off)
			return nil
		}
		p.holders.set(off, id)
		p.used.inc(off >> p.blockShift)
		if vips.Contains(off) {
			p.services[id] = append(p.services[id], off)
		}
	}
	p.held, p.vips = held, vips

	nn := d.count("node count")
	prev = -1
	for range nn {
		n := d.bounded(1<<32-1, "node")
		ne := d.count("entry count")
		if d.Err() != nil || int64(n) <= prev || ne == 0 {
			d.fail("quarantine of node %d is invalid", n)
			return nil
		}
		prev = int64(n)
		q := &nodeQueue{entries: make([]qEntry, 0, ne)}
		for range ne {
			e := qEntry{seq: d.uvarint("release seq"), off: uint32(d.bounded(size-1, "quarantined offset"))}
			id := d.uvarint("holder")
			switch {
			case d.Err() != nil:
				return nil
			case id == 0 || p.reserved.Contains(e.off) || p.held.Contains(e.off) || p.quarantined.Contains(e.off):
				d.fail("quarantined offset %d is invalid", e.off)
				return nil
			case len(q.entries) > 0 && !q.entries[len(q.entries)-1].less(e):
				d.fail("quarantine of node %d out of order", n)
				return nil
			}
			q.entries = append(q.entries, e)
			p.quarantined.Add(e.off)
			p.holders.set(e.off, id)
			p.used.inc(e.off >> p.blockShift)
		}
		p.nodes[uint32(n)] = q
	}
	if d.Err() == nil && d.Len() != 0 {
		d.fail("%d trailing bytes", d.Len())
	}
	if d.Err() != nil {
		return nil
	}

	occupied := roaring.Or(p.held, p.quarantined)
	for b, u := range p.used.v {
		if u != 0 && p.blockOwner.get(uint32(b)) == 0 {
			p.leasable.Remove(uint32(b))
		}
	}
	p.unleased.free.AndNot(occupied)
	p.unleased.free.RunOptimize()
	for _, os := range p.owners {
		os.free.AndNot(occupied)
		os.free.RunOptimize()
	}
	p.nHeld = int(p.held.GetCardinality())
	p.nQuar = int(p.quarantined.GetCardinality())
	p.nFree = p.usable - p.nHeld - p.nQuar
	return p
}
