package ipam

import (
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// CheckInvariants verifies the pool's internal consistency and returns the
// first broken invariant. It walks every set, so it costs O(subnet size):
// meant for tests, the model checker and debugging, not the hot path.
func (p *Pool) CheckInvariants() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("ipam: broken invariant in network %s: "+format, append([]any{p.label()}, args...)...)
	}
	all := []*roaring.Bitmap{p.reserved, p.held, p.quarantined, p.unleased.free}
	free := p.unleased.free.GetCardinality()
	for _, os := range p.owners {
		all = append(all, os.free)
		free += os.free.GetCardinality()
	}
	union := roaring.FastOr(all...)
	sum := uint64(0)
	for _, bm := range all {
		sum += bm.GetCardinality()
	}
	// Every offset of the subnet is in exactly one of reserved, held,
	// quarantined and one owner's free set.
	if sum != uint64(p.size) || union.GetCardinality() != uint64(p.size) || (!union.IsEmpty() && union.Maximum() != p.size-1) {
		return fail("sets are not a partition of the subnet: sum %d, union %d, size %d", sum, union.GetCardinality(), p.size)
	}
	if int(free) != p.nFree || int(p.held.GetCardinality()) != p.nHeld || int(p.quarantined.GetCardinality()) != p.nQuar {
		return fail("counters free=%d held=%d quarantined=%d disagree with sets", p.nFree, p.nHeld, p.nQuar)
	}
	if p.nFree+p.nHeld+p.nQuar != p.usable {
		return fail("free+held+quarantined = %d, want %d", p.nFree+p.nHeld+p.nQuar, p.usable)
	}

	// A slot has a holder exactly when its address is held or quarantined.
	occupied := roaring.Or(p.held, p.quarantined)
	for c, chunk := range p.holders.chunks {
		live := 0
		for i := range chunkSize {
			off := uint32(c*chunkSize + i)
			has := chunk != nil && chunk[i] != 0
			if has != occupied.Contains(off) {
				return fail("offset %d: holder recorded=%v, occupied=%v", off, has, !has)
			}
			if has {
				live++
			}
		}
		if live != int(p.holders.live[c]) || (chunk != nil && live == 0) {
			return fail("chunk %d: live count %d, actual %d", c, p.holders.live[c], live)
		}
	}
	if !occupied.IsEmpty() && int(occupied.Maximum()) >= len(p.holders.chunks)*chunkSize {
		return fail("offset %d is occupied past the holder index (%d chunks)", occupied.Maximum(), len(p.holders.chunks))
	}
	if len(p.holders.chunks) > int(p.holders.limit) || len(p.used.v) > p.NumBlocks() || len(p.blockOwner.v) > p.NumBlocks() {
		return fail("a table is longer than the subnet")
	}

	if err := p.checkVIPs(); err != nil {
		return fail("%w", err)
	}
	if err := p.checkQuarantine(); err != nil {
		return fail("%w", err)
	}
	if err := p.checkBlocks(occupied); err != nil {
		return fail("%w", err)
	}
	return nil
}

func (p *Pool) checkVIPs() error {
	if p.vips.AndCardinality(p.held) != p.vips.GetCardinality() {
		return errors.New("a VIP is not held")
	}
	n := 0
	for s, offs := range p.services {
		if len(offs) == 0 || !slices.IsSorted(offs) {
			return fmt.Errorf("service %d has an empty or unsorted VIP list", s)
		}
		for _, off := range offs {
			if !p.vips.Contains(off) || p.holders.get(off) != s {
				return fmt.Errorf("service %d lists offset %d that it does not hold as a VIP", s, off)
			}
		}
		n += len(offs)
	}
	if n != int(p.vips.GetCardinality()) {
		return fmt.Errorf("services list %d VIPs, set has %d", n, p.vips.GetCardinality())
	}
	return nil
}

func (p *Pool) checkQuarantine() error {
	seen := roaring.New()
	for n, q := range p.nodes {
		if len(q.entries) == 0 {
			return fmt.Errorf("node %d has an empty quarantine", n)
		}
		for i, e := range q.entries {
			if i > 0 && !q.entries[i-1].less(e) {
				return fmt.Errorf("node %d quarantine out of order at %d", n, i)
			}
			if !seen.CheckedAdd(e.off) {
				return fmt.Errorf("offset %d quarantined twice", e.off)
			}
		}
	}
	if !seen.Equals(p.quarantined) {
		return errors.New("node quarantine lists disagree with the quarantined set")
	}
	return nil
}

func (p *Pool) checkBlocks(occupied *roaring.Bitmap) error {
	for o, os := range p.owners {
		if o == 0 || os.blocks.IsEmpty() {
			return fmt.Errorf("owner %d has no block", o)
		}
		if os.next > p.size {
			return fmt.Errorf("owner %d cursor %d past the subnet", o, os.next)
		}
	}
	if p.unleased.next > p.size {
		return fmt.Errorf("unleased cursor %d past the subnet", p.unleased.next)
	}
	leased := uint64(0)
	for _, os := range p.owners {
		leased += os.blocks.GetCardinality()
	}
	leasable := roaring.New()
	for i := range p.NumBlocks() {
		o := p.blockOwner.get(uint32(i))
		if o != 0 {
			leased--
		}
		b := BlockID(i)
		lo, hi := p.blockRange(b)
		used := p.used.get(uint32(b))
		if u := occupied.CardinalityInRange(lo, hi); u != uint64(used) {
			return fmt.Errorf("block %d: used %d, actual %d", b, used, u)
		}
		os := p.ownerOf(o)
		if os == nil || (o != 0 && !os.blocks.Contains(uint32(b))) {
			return fmt.Errorf("block %d: owner %d does not list it", b, o)
		}
		free := os.free.CardinalityInRange(lo, hi)
		if int(free)+int(used) != p.blockUsable(b) {
			return fmt.Errorf("block %d: %d free + %d used != %d usable in owner %d's set", b, free, used, p.blockUsable(b), o)
		}
		if o == 0 && used == 0 && p.blockUsable(b) > 0 {
			leasable.Add(uint32(b))
		}
	}
	if leased != 0 {
		return errors.New("owners list blocks leased to someone else")
	}
	if !leasable.Equals(p.leasable) {
		return errors.New("leasable block set is stale")
	}
	return nil
}
