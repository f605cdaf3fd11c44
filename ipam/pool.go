package ipam

import (
	"fmt"
	"net/netip"

	"github.com/RoaringBitmap/roaring/v2"
)

// Kind says what holds an address.
type Kind uint8

const (
	// KindTask: a task's network attachment; released through quarantine.
	KindTask Kind = iota + 1
	// KindVIP: a service's virtual IP; freed by ReleaseVIP.
	KindVIP
)

// String returns "task" or "vip".
func (k Kind) String() string {
	switch k {
	case KindTask:
		return "task"
	case KindVIP:
		return "vip"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Holder identifies who holds an address: a task ID or, for a VIP, a service ID.
type Holder struct {
	Kind Kind
	ID   uint64
}

// String formats the holder as "task 42" or "service 7 (vip)".
func (h Holder) String() string {
	if h.Kind == KindVIP {
		return fmt.Sprintf("service %d (vip)", h.ID)
	}
	return fmt.Sprintf("%s %d", h.Kind, h.ID)
}

// State is where an address of the subnet stands.
type State uint8

const (
	// StateReserved: network, broadcast, gateway or a reserved range; never allocated.
	StateReserved State = iota + 1
	// StateFree: may be allocated.
	StateFree
	// StateHeld: allocated to a holder.
	StateHeld
	// StateQuarantined: released, waiting for its node to confirm it gone.
	StateQuarantined
)

// String returns the state's lower-case name.
func (s State) String() string {
	switch s {
	case StateReserved:
		return "reserved"
	case StateFree:
		return "free"
	case StateHeld:
		return "held"
	case StateQuarantined:
		return "quarantined"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// BlockID numbers the blocks of a subnet from 0, in address order.
type BlockID uint32

// ownerState is the region of one owner: the free addresses of its blocks and
// its allocation cursor.
type ownerState struct {
	free   *roaring.Bitmap // free offsets in the owner's blocks
	blocks *roaring.Bitmap // leased block IDs (unused for owner 0)
	next   uint32          // offset where the next search starts
}

// Pool is the address pool of one network. Create it with New; the zero Pool
// is only a target for UnmarshalBinary.
type Pool struct {
	layout

	reserved    *roaring.Bitmap // offsets never allocated
	usable      int             // size minus reserved
	held        *roaring.Bitmap // held offsets, VIPs included
	vips        *roaring.Bitmap // held offsets of kind KindVIP
	quarantined *roaring.Bitmap
	holders     holderTable
	nFree       int
	nHeld       int
	nQuar       int

	used       blockTable      // held+quarantined addresses per block
	blockOwner blockTable      // 0 = unleased
	leasable   *roaring.Bitmap // unleased blocks with no used and some usable address
	unleased   ownerState      // owner 0
	owners     map[uint32]*ownerState

	nodes    map[uint32]*nodeQueue // quarantine by node
	services map[uint64][]uint32   // VIP offsets by service, ascending
}

// New validates c and returns an empty pool: every usable address free, no
// block leased.
func New(c Config) (*Pool, error) {
	l, err := newLayout(c)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		layout:      l,
		reserved:    roaring.New(),
		held:        roaring.New(),
		vips:        roaring.New(),
		quarantined: roaring.New(),
		holders:     newHolderTable(l.size),
		owners:      map[uint32]*ownerState{},
		nodes:       map[uint32]*nodeQueue{},
		services:    map[uint64][]uint32{},
	}
	p.reserved.Add(0)
	p.reserved.Add(l.size - 1)
	p.reserved.Add(l.gateway)
	for _, r := range l.ranges {
		p.reserved.AddRange(uint64(r[0]), uint64(r[1])+1)
	}
	p.usable = int(uint64(l.size) - p.reserved.GetCardinality())
	if p.usable == 0 {
		return nil, fmt.Errorf("%w: reserved addresses cover all of network %s", ErrInvalidConfig, p.label())
	}
	p.nFree = p.usable
	p.unleased = ownerState{free: roaring.New(), blocks: roaring.New()}
	p.unleased.free.AddRange(0, uint64(l.size))
	p.unleased.free.AndNot(p.reserved)
	p.unleased.free.RunOptimize()

	nb := l.size >> l.blockShift
	p.used = newBlockTable(nb)
	p.blockOwner = newBlockTable(nb)
	p.leasable = roaring.New()
	for b := range nb {
		if p.blockUsable(BlockID(b)) > 0 {
			p.leasable.Add(b)
		}
	}
	p.leasable.RunOptimize()
	return p, nil
}

// Config returns the pool's configuration in normalised form: Gateway set,
// Reserved merged and sorted, BlockSize effective.
func (p *Pool) Config() Config {
	c := p.cfg
	c.Reserved = append([]Range(nil), c.Reserved...)
	return c
}

// Prefix returns the pool's subnet.
func (p *Pool) Prefix() netip.Prefix { return p.cfg.Subnet }

// Size returns the number of usable addresses: the subnet minus network,
// broadcast, gateway and reserved ranges. Free()+Held()+Quarantined() == Size().
func (p *Pool) Size() int { return p.usable }

// Free returns the number of free addresses, in all regions.
func (p *Pool) Free() int { return p.nFree }

// Held returns the number of held addresses, VIPs included.
func (p *Pool) Held() int { return p.nHeld }

// Quarantined returns the number of released addresses not yet confirmed.
func (p *Pool) Quarantined() int { return p.nQuar }

// label names the network in messages.
func (p *Pool) label() string {
	if p.cfg.Name != "" {
		return fmt.Sprintf("%q (%s)", p.cfg.Name, p.cfg.Subnet)
	}
	return p.cfg.Subnet.String()
}

func (p *Pool) addr(off uint32) netip.Addr { return u32Addr(p.base + off) }

// offset converts a to an offset, or fails with ErrOutsideSubnet.
func (p *Pool) offset(a netip.Addr) (uint32, error) {
	if !a.Is4() || !p.cfg.Subnet.Contains(a) {
		return 0, fmt.Errorf("%w: %s is not in network %s", ErrOutsideSubnet, a, p.label())
	}
	return addrU32(a) - p.base, nil
}

func (p *Pool) ownerOf(o uint32) *ownerState {
	if o == 0 {
		return &p.unleased
	}
	return p.owners[o]
}

// holderAt returns the holder of an occupied offset.
func (p *Pool) holderAt(off uint32) Holder {
	k := KindTask
	if p.vips.Contains(off) {
		k = KindVIP
	}
	return Holder{Kind: k, ID: p.holders.get(off)}
}

// State returns where a stands, or an ErrOutsideSubnet error.
func (p *Pool) State(a netip.Addr) (State, error) {
	off, err := p.offset(a)
	if err != nil {
		return 0, err
	}
	return p.stateAt(off), nil
}

func (p *Pool) stateAt(off uint32) State {
	switch {
	case p.held.Contains(off):
		return StateHeld
	case p.quarantined.Contains(off):
		return StateQuarantined
	case p.reserved.Contains(off):
		return StateReserved
	}
	return StateFree
}

// Holder returns the holder of a held or quarantined address (a quarantined
// address keeps the holder that released it until it is freed), and false
// for a free, reserved or outside address.
func (p *Pool) Holder(a netip.Addr) (Holder, bool) {
	off, err := p.offset(a)
	if err != nil || p.holders.get(off) == 0 {
		return Holder{}, false
	}
	return p.holderAt(off), true
}

// Allocate gives task the next free address of owner's region (owner 0: the
// unleased blocks), after the owner's cursor and wrapping. It fails with
// ErrExhausted when the region has no free address; a leasing owner then
// calls LeaseBlock and retries.
func (p *Pool) Allocate(owner uint32, task uint64) (netip.Addr, error) {
	return p.allocateNext(owner, Holder{KindTask, task})
}

// AllocateVIP is Allocate for a service's virtual IP.
func (p *Pool) AllocateVIP(owner uint32, service uint64) (netip.Addr, error) {
	return p.allocateNext(owner, Holder{KindVIP, service})
}

// AllocateAddr gives task the requested address a, which must be free and in
// owner's region. Errors: ErrOutsideSubnet, ErrReserved, ErrInUse,
// ErrQuarantined, ErrNotLeased, ErrInvalidID.
func (p *Pool) AllocateAddr(owner uint32, a netip.Addr, task uint64) error {
	return p.allocateAt(owner, a, Holder{KindTask, task})
}

// AllocateVIPAddr is AllocateAddr for a service's virtual IP.
func (p *Pool) AllocateVIPAddr(owner uint32, a netip.Addr, service uint64) error {
	return p.allocateAt(owner, a, Holder{KindVIP, service})
}

func (p *Pool) allocateNext(owner uint32, h Holder) (netip.Addr, error) {
	if h.ID == 0 {
		return netip.Addr{}, fmt.Errorf("%w: %s ID 0 cannot hold an address in network %s", ErrInvalidID, h.Kind, p.label())
	}
	os := p.ownerOf(owner)
	if os == nil || os.free.IsEmpty() {
		return netip.Addr{}, p.exhausted(owner)
	}
	v := os.free.NextValue(os.next)
	if v < 0 {
		v = int64(os.free.Minimum())
	}
	off := uint32(v)
	os.free.Remove(off)
	os.next = off + 1
	p.hold(off, h)
	return p.addr(off), nil
}

func (p *Pool) allocateAt(owner uint32, a netip.Addr, h Holder) error {
	if h.ID == 0 {
		return fmt.Errorf("%w: %s ID 0 cannot hold an address in network %s", ErrInvalidID, h.Kind, p.label())
	}
	off, err := p.offset(a)
	if err != nil {
		return err
	}
	switch p.stateAt(off) {
	case StateReserved:
		return fmt.Errorf("%w: %s is the network, broadcast or gateway address or in a reserved range of network %s",
			ErrReserved, a, p.label())
	case StateHeld:
		return fmt.Errorf("%w: %s in network %s is held by %s", ErrInUse, a, p.label(), p.holderAt(off))
	case StateQuarantined:
		return fmt.Errorf("%w: %s in network %s was released by %s and its node has not confirmed it gone; retry later or pick another address",
			ErrQuarantined, a, p.label(), p.holderAt(off))
	}
	b := off >> p.blockShift
	if o := p.blockOwner.get(b); o != owner {
		if o == 0 {
			return fmt.Errorf("%w: %s is in block %d of network %s, which is not leased to group %d",
				ErrNotLeased, a, b, p.label(), owner)
		}
		return fmt.Errorf("%w: %s is in block %d of network %s, leased to group %d, not %d",
			ErrNotLeased, a, b, p.label(), o, owner)
	}
	p.ownerOf(owner).free.Remove(off)
	p.hold(off, h)
	return nil
}

// hold marks an offset, already taken out of its free set, held by h.
func (p *Pool) hold(off uint32, h Holder) {
	p.held.Add(off)
	if h.Kind == KindVIP {
		p.vips.Add(off)
		p.services[h.ID] = insertSorted(p.services[h.ID], off)
	}
	p.holders.set(off, h.ID)
	b := off >> p.blockShift
	if p.used.get(b) == 0 && p.blockOwner.get(b) == 0 {
		p.leasable.Remove(b)
	}
	p.used.inc(b)
	p.nFree--
	p.nHeld++
}

// release returns an occupied offset, already removed from the held or
// quarantined set, to the free set of its block's owner.
func (p *Pool) release(off uint32) {
	p.holders.clear(off)
	b := off >> p.blockShift
	p.used.dec(b)
	o := p.blockOwner.get(b)
	p.ownerOf(o).free.Add(off)
	if o == 0 && p.used.get(b) == 0 {
		p.leasable.Add(b)
	}
	p.nFree++
}

// exhausted builds the ErrExhausted error for owner's region.
func (p *Pool) exhausted(owner uint32) error {
	region := roaring.New()
	nBlocks := 0
	if owner == 0 {
		region.AddRange(0, uint64(p.size))
		for b, o := range p.blockOwner.v {
			if o != 0 {
				region.RemoveRange(uint64(b)<<p.blockShift, uint64(b+1)<<p.blockShift)
			}
		}
	} else if os := p.owners[owner]; os != nil {
		for _, b := range os.blocks.ToArray() {
			region.AddRange(uint64(b)<<p.blockShift, uint64(b+1)<<p.blockShift)
		}
		nBlocks = int(os.blocks.GetCardinality())
	}
	held := p.held.AndCardinality(region)
	quar := p.quarantined.AndCardinality(region)
	switch {
	case owner == 0:
		return fmt.Errorf("%w: network %s has no free unleased address: %d held and %d quarantined there (%d held, %d quarantined in the whole pool of %d); wait for quarantined addresses to be confirmed or use a larger subnet",
			ErrExhausted, p.label(), held, quar, p.nHeld, p.nQuar, p.usable)
	case nBlocks == 0:
		return fmt.Errorf("%w: network %s has no address block for group %d (%d held, %d quarantined of its %d addresses); use a larger subnet",
			ErrExhausted, p.label(), owner, p.nHeld, p.nQuar, p.usable)
	}
	return fmt.Errorf("%w: network %s has no free address for group %d: %d held, %d quarantined in its %d block(s) (%d held, %d quarantined of the network's %d); wait for quarantined addresses to be confirmed gone by their nodes' sync (or for those nodes to be down past the orphan timeout), or use a larger subnet",
		ErrExhausted, p.label(), owner, held, quar, nBlocks, p.nHeld, p.nQuar, p.usable)
}

// insertSorted inserts v into the ascending slice s.
func insertSorted(s []uint32, v uint32) []uint32 {
	i := len(s)
	for i > 0 && s[i-1] > v {
		i--
	}
	s = append(s, 0)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}
