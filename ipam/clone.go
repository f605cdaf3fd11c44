package ipam

import (
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// Clone returns a deep copy of the pool: changes to either never show in
// the other. It is much cheaper than a MarshalBinary/UnmarshalBinary round
// trip.
func (p *Pool) Clone() *Pool {
	c := *p
	// layout is immutable after New: sharing it is safe.
	c.reserved = cloneBitmap(p.reserved)
	c.held = cloneBitmap(p.held)
	c.vips = cloneBitmap(p.vips)
	c.quarantined = cloneBitmap(p.quarantined)
	c.holders = holderTable{chunks: make([]*[chunkSize]uint64, len(p.holders.chunks)), live: slices.Clone(p.holders.live), limit: p.holders.limit}
	for i, ch := range p.holders.chunks {
		if ch != nil {
			cp := *ch
			c.holders.chunks[i] = &cp
		}
	}
	c.used = p.used.clone()
	c.blockOwner = p.blockOwner.clone()
	c.leasable = cloneBitmap(p.leasable)
	c.unleased = cloneOwner(p.unleased)
	c.owners = make(map[uint32]*ownerState, len(p.owners))
	for id, o := range p.owners {
		co := cloneOwner(*o)
		c.owners[id] = &co
	}
	c.nodes = make(map[uint32]*nodeQueue, len(p.nodes))
	for id, q := range p.nodes {
		c.nodes[id] = &nodeQueue{entries: slices.Clone(q.entries)}
	}
	c.services = make(map[uint64][]uint32, len(p.services))
	for id, offs := range p.services {
		c.services[id] = slices.Clone(offs)
	}
	return &c
}

func cloneBitmap(b *roaring.Bitmap) *roaring.Bitmap {
	if b == nil {
		return nil
	}
	return b.Clone()
}

func cloneOwner(o ownerState) ownerState {
	return ownerState{free: cloneBitmap(o.free), blocks: cloneBitmap(o.blocks), next: o.next}
}
