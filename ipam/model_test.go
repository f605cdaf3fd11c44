package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// This file holds a naive reference model of a Pool (maps and linear scans)
// and a harness that runs one operation on both and reports what happened.
// The property, fuzz and regression tests share it.

// opKind names an operation of the harness.
type opKind uint8

const (
	opAlloc opKind = iota
	opAllocVIP
	opAllocAt
	opRelease
	opFreeUnassigned
	opConfirm
	opExpire
	opReleaseVIP
	opLease
	opLeaseAt
	opReleaseBlock
	opRoundTrip
	numOps
)

var opNames = [...]string{"alloc", "alloc-vip", "alloc-at", "release", "free-unassigned", "confirm", "expire",
	"release-vip", "lease", "lease-at", "release-block", "round-trip"}

func (k opKind) String() string { return opNames[k] }

// op is one operation. pick selects an address or block: even values pick
// among live addresses (or the owner's blocks), odd values any offset,
// including a few outside the subnet. id 0 on a release means "the holder
// the model knows".
type op struct {
	kind  opKind
	owner uint32
	id    uint64
	pick  uint32
	node  uint32
	seq   uint64
	keep  uint8 // confirm: 0 = node holds nothing, else a hash selector
}

func (o op) String() string {
	return fmt.Sprintf("%s(owner=%d id=%d pick=%d node=%d seq=%d keep=%d)", o.kind, o.owner, o.id, o.pick, o.node, o.seq, o.keep)
}

// stillHeldFor returns the deterministic sync report of a confirm op.
func stillHeldFor(keep uint8) StillHeld {
	if keep == 0 {
		return nil
	}
	return func(a netip.Addr, holder uint64) bool {
		return (uint64(addrU32(a))+holder+uint64(keep))%3 == 0
	}
}

// live is the model's record of a held or quarantined address.
type live struct {
	holder      Holder
	quarantined bool
	node        uint32
	seq         uint64
}

// model is the naive reference: what the pool should contain.
type model struct {
	l          layout
	reserved   map[uint32]bool
	live       map[uint32]live
	blockOwner map[uint32]uint32 // leased blocks only
	cursor     map[uint32]uint32 // owner 0 always present
}

func newModel(l layout) *model {
	m := &model{l: l, reserved: map[uint32]bool{0: true, l.size - 1: true, l.gateway: true},
		live: map[uint32]live{}, blockOwner: map[uint32]uint32{}, cursor: map[uint32]uint32{0: 0}}
	for _, r := range l.ranges {
		for o := r[0]; o <= r[1]; o++ {
			m.reserved[o] = true
		}
	}
	return m
}

func (m *model) nblocks() uint32 { return m.l.size >> m.l.blockShift }

func (m *model) blockUsed(b uint32) bool {
	for o := b << m.l.blockShift; o < (b+1)<<m.l.blockShift; o++ {
		if _, ok := m.live[o]; ok {
			return true
		}
	}
	return false
}

func (m *model) blockUsable(b uint32) bool {
	for o := b << m.l.blockShift; o < (b+1)<<m.l.blockShift; o++ {
		if !m.reserved[o] {
			return true
		}
	}
	return false
}

func (m *model) ownerBlocks(owner uint32) []uint32 {
	var out []uint32
	for b, o := range m.blockOwner {
		if o == owner {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// nextFree is the rotating-cursor policy written as a linear scan.
func (m *model) nextFree(owner uint32) (uint32, bool) {
	cur, ok := m.cursor[owner]
	if !ok {
		return 0, false
	}
	for i := range m.l.size {
		off := (cur + i) % m.l.size
		if !m.reserved[off] && m.blockOwner[off>>m.l.blockShift] == owner {
			if _, busy := m.live[off]; !busy {
				return off, true
			}
		}
	}
	return 0, false
}

func (m *model) counts() (free, held, quar int) {
	for _, v := range m.live {
		if v.quarantined {
			quar++
		} else {
			held++
		}
	}
	return int(m.l.size) - len(m.reserved) - held - quar, held, quar
}

// errClasses orders the sentinels for classifying an error.
var errClasses = []error{ErrInvalidID, ErrOutsideSubnet, ErrNotHeld, ErrReserved, ErrInUse, ErrQuarantined,
	ErrNotLeased, ErrNoFreeBlock, ErrExhausted, ErrInvalidBlock, ErrBlockInUse}

func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range errClasses {
		if errors.Is(err, c) {
			return c
		}
	}
	return err
}

// harness runs ops on a Pool and the model side by side.
type harness struct {
	p *Pool
	m *model
}

func newHarness(c Config) (*harness, error) {
	p, err := New(c)
	if err != nil {
		return nil, err
	}
	return &harness{p: p, m: newModel(p.layout)}, nil
}

// step is what one op did.
type step struct {
	op        op
	addr      netip.Addr // the address acted on or allocated
	err       error
	prevLive  *live  // allocation: what the model had at the allocated address before
	freed     []live // tags of the addresses the op freed, in freed order
	freedOffs []uint32
	mismatch  error // pool result differs from the model's prediction
}

func (h *harness) liveOffs() []uint32 {
	out := make([]uint32, 0, len(h.m.live))
	for o := range h.m.live {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

func (h *harness) pickOff(pick uint32) uint32 {
	if pick%2 == 0 && len(h.m.live) > 0 {
		offs := h.liveOffs()
		return offs[(pick/2)%uint32(len(offs))]
	}
	return (pick / 2) % (h.m.l.size + 2) // size and size+1 lie outside the subnet
}

func (h *harness) pickBlock(owner, pick uint32) uint32 {
	if bs := h.m.ownerBlocks(owner); pick%2 == 0 && len(bs) > 0 {
		return bs[(pick/2)%uint32(len(bs))]
	}
	return (pick / 2) % (h.m.nblocks() + 1)
}

func (h *harness) addr(off uint32) netip.Addr { return u32Addr(h.m.l.base + off) }

// apply runs o on the pool, compares with the model's prediction, and then
// updates the model from what the pool actually did, so later checks judge
// the pool's real behaviour.
func (h *harness) apply(o op) step {
	m := h.m
	s := step{op: o}
	var want error // predicted error class
	var wantOff uint32
	var wantFreed []uint32
	switch o.kind {
	case opAlloc, opAllocVIP:
		kind := KindTask
		if o.kind == opAllocVIP {
			kind = KindVIP
		}
		off, ok := m.nextFree(o.owner)
		switch {
		case o.id == 0:
			want = ErrInvalidID
		case !ok:
			want = ErrExhausted
		}
		wantOff = off
		if kind == KindVIP {
			s.addr, s.err = h.p.AllocateVIP(o.owner, o.id)
		} else {
			s.addr, s.err = h.p.Allocate(o.owner, o.id)
		}
		if s.err == nil {
			got := addrU32(s.addr) - m.l.base
			if prev, ok := m.live[got]; ok {
				s.prevLive = &prev
			}
			if want == nil && got != wantOff {
				s.mismatch = fmt.Errorf("allocated %s, model expects %s", s.addr, h.addr(wantOff))
			}
			m.live[got] = live{holder: Holder{kind, o.id}}
			m.cursor[o.owner] = got + 1
		}
	case opAllocAt:
		off := h.pickOff(o.pick)
		s.addr = h.addr(off)
		v, busy := m.live[off]
		switch {
		case o.id == 0:
			want = ErrInvalidID
		case off >= m.l.size:
			want = ErrOutsideSubnet
		case m.reserved[off]:
			want = ErrReserved
		case busy && v.quarantined:
			want = ErrQuarantined
		case busy:
			want = ErrInUse
		case m.blockOwner[off>>m.l.blockShift] != o.owner:
			want = ErrNotLeased
		}
		s.err = h.p.AllocateAddr(o.owner, s.addr, o.id)
		if s.err == nil {
			if busy {
				s.prevLive = &v
			}
			m.live[off] = live{holder: Holder{KindTask, o.id}}
		}
	case opRelease, opFreeUnassigned:
		off := h.pickOff(o.pick)
		s.addr = h.addr(off)
		v, busy := m.live[off]
		id := o.id
		if id == 0 {
			id = v.holder.ID
		}
		switch {
		case off >= m.l.size:
			want = ErrOutsideSubnet
		case !busy || v.quarantined || v.holder != (Holder{KindTask, id}):
			want = ErrNotHeld
		}
		if o.kind == opRelease {
			s.err = h.p.Release(s.addr, id, o.node, o.seq)
			if s.err == nil {
				m.live[off] = live{holder: v.holder, quarantined: true, node: o.node, seq: o.seq}
			}
		} else {
			s.err = h.p.FreeUnassigned(s.addr, id)
			if s.err == nil {
				wantFreed = []uint32{off}
				h.recordFreed(&s, []netip.Addr{s.addr})
			}
		}
	case opConfirm, opExpire:
		type tagged struct {
			off uint32
			v   live
		}
		var cands []tagged
		keep := stillHeldFor(o.keep)
		for off, v := range m.live {
			if !v.quarantined || v.node != o.node {
				continue
			}
			if o.kind == opConfirm && (v.seq > o.seq || (keep != nil && keep(h.addr(off), v.holder.ID))) {
				continue
			}
			cands = append(cands, tagged{off, v})
		}
		slices.SortFunc(cands, func(a, b tagged) int {
			return cmp.Or(cmp.Compare(a.v.seq, b.v.seq), cmp.Compare(a.off, b.off))
		})
		for _, c := range cands {
			wantFreed = append(wantFreed, c.off)
		}
		var freed []netip.Addr
		if o.kind == opConfirm {
			freed = h.p.ConfirmSync(o.node, o.seq, keep)
		} else {
			freed = h.p.ExpireNode(o.node)
		}
		h.recordFreed(&s, freed)
	case opReleaseVIP:
		for off, v := range m.live {
			if v.holder == (Holder{KindVIP, o.id}) {
				wantFreed = append(wantFreed, off)
			}
		}
		slices.Sort(wantFreed)
		h.recordFreed(&s, h.p.ReleaseVIP(o.id))
	case opLease, opLeaseAt:
		var b uint32
		if o.kind == opLease {
			want = ErrNoFreeBlock
			for b = 0; b < m.nblocks(); b++ {
				if _, leased := m.blockOwner[b]; !leased && !m.blockUsed(b) && m.blockUsable(b) {
					want = nil
					break
				}
			}
		} else {
			b = h.pickBlock(0, o.pick)
			_, leased := m.blockOwner[b]
			switch {
			case b >= m.nblocks():
				want = ErrInvalidBlock
			case leased || m.blockUsed(b):
				want = ErrBlockInUse
			case !m.blockUsable(b):
				want = ErrInvalidBlock
			}
		}
		if o.owner == 0 {
			want = ErrInvalidID
		}
		wantOff = b
		var got BlockID
		if o.kind == opLease {
			got, s.err = h.p.LeaseBlock(o.owner)
		} else {
			got, s.err = BlockID(b), h.p.LeaseBlockAt(o.owner, BlockID(b))
		}
		if s.err == nil {
			if uint32(got) != wantOff && want == nil {
				s.mismatch = fmt.Errorf("leased block %d, model expects %d", got, wantOff)
			}
			if _, ok := m.cursor[o.owner]; !ok {
				m.cursor[o.owner] = uint32(got) << m.l.blockShift
			}
			m.blockOwner[uint32(got)] = o.owner
		}
	case opReleaseBlock:
		b := h.pickBlock(o.owner, o.pick)
		switch {
		case b >= m.nblocks():
			want = ErrInvalidBlock
		case o.owner == 0 || m.blockOwner[b] != o.owner:
			want = ErrNotLeased
		case m.blockUsed(b):
			want = ErrBlockInUse
		}
		s.err = h.p.ReleaseBlock(o.owner, BlockID(b))
		if s.err == nil {
			delete(m.blockOwner, b)
			if len(m.ownerBlocks(o.owner)) == 0 {
				delete(m.cursor, o.owner)
			}
		}
	case opRoundTrip:
		s.err = h.roundTrip()
		if s.err != nil {
			s.mismatch = s.err
		}
		return s
	}
	if s.mismatch == nil {
		if got := classify(s.err); got != want {
			s.mismatch = fmt.Errorf("error %v, model expects %v", s.err, want)
		} else if !slices.Equal(s.freedOffs, wantFreed) && (o.kind >= opFreeUnassigned && o.kind <= opReleaseVIP) {
			s.mismatch = fmt.Errorf("freed %v, model expects %v", s.freedOffs, wantFreed)
		}
	}
	return s
}

// recordFreed notes the model's tags of freed addresses and forgets them.
func (h *harness) recordFreed(s *step, freed []netip.Addr) {
	for _, a := range freed {
		off := addrU32(a) - h.m.l.base
		s.freed = append(s.freed, h.m.live[off])
		s.freedOffs = append(s.freedOffs, off)
		delete(h.m.live, off)
	}
}

// roundTrip replaces the pool by its decoded encoding and checks that the
// encoding is stable.
func (h *harness) roundTrip() error {
	b1, err := h.p.MarshalBinary()
	if err != nil {
		return err
	}
	var q Pool
	if err := q.UnmarshalBinary(b1); err != nil {
		return fmt.Errorf("unmarshal own encoding: %w", err)
	}
	b2, err := q.MarshalBinary()
	if err != nil {
		return err
	}
	if string(b1) != string(b2) {
		return fmt.Errorf("encoding not stable across a round trip (%d vs %d bytes)", len(b1), len(b2))
	}
	h.p = &q
	return nil
}

// checkState compares every address of the pool with the model.
func (h *harness) checkState() error {
	for off := range h.m.l.size {
		a := h.addr(off)
		st, err := h.p.State(a)
		if err != nil {
			return err
		}
		hold, ok := h.p.Holder(a)
		v, busy := h.m.live[off]
		want := StateFree
		switch {
		case h.m.reserved[off]:
			want = StateReserved
		case busy && v.quarantined:
			want = StateQuarantined
		case busy:
			want = StateHeld
		}
		if st != want {
			return fmt.Errorf("%s is %s, model says %s", a, st, want)
		}
		if ok != busy || (busy && hold != v.holder) {
			return fmt.Errorf("%s holder %v (%v), model says %v (%v)", a, hold, ok, v.holder, busy)
		}
	}
	return nil
}
