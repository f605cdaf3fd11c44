package statemachine

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"shoal/ipam"
)

// Address-block leases. Every group keeps a pool per network. With one
// service group, that group leases every block of a network when it is
// created (there is no one to share with). With more, blocks are leased on
// demand: a service group whose own blocks have no free address for a task
// or a VIP lets it wait and asks (the duty reads BlockWants and sends
// CmdRequestBlocks); the cluster group leases free blocks to it in its own
// pool and the grant travels back through the outbox; installing it retries
// the waiting tasks. A group gives back blocks that emptied and that nothing
// waits for (CmdReleaseBlocks, then CmdReturnBlocks to the cluster group),
// so a block is leased to one group at a time and only the cluster group
// hands it out again: an address is never held in two groups (invariant 6
// across groups). A network is full only when the cluster group has no
// block left to lease; the group is then told so and its tasks say it.

// maxGrantBlocks bounds the blocks one grant carries (one outbox entry).
const maxGrantBlocks = 4096

// errWaitBlock marks an allocation that waits for a block lease
// (errors.Is); its text is a waitBlock's, which speaks to users.
var errWaitBlock = errors.New("waiting for an address block")

// waitBlock says which network's block a task waits for.
type waitBlock struct{ msg string }

func (e waitBlock) Error() string      { return e.msg }
func (waitBlock) Is(target error) bool { return target == errWaitBlock }

// blockSize picks a network's block size. One service group leases the
// whole network, so the default size does. With more, blocks are small
// enough that the network has at least 64 per group (down to single
// addresses), so what one group holds but does not use stays small.
func blockSize(p netip.Prefix, groups int) uint32 {
	if groups <= 1 {
		return ipam.DefaultBlockSize
	}
	size := uint64(1) << (32 - p.Bits())
	bs := uint64(ipam.DefaultBlockSize)
	for bs > ipam.MinBlockSize && size/bs < 64*uint64(groups) {
		bs /= 2
	}
	return uint32(bs)
}

// leasing reports whether blocks are leased on demand (more than one
// service group).
func (s *State) leasing() bool { return s.groups() > 1 }

// leaseInitial leases every block of a new pool to the only service group
// (in its own state and in the cluster group's).
func (s *State) leaseInitial(pool *ipam.Pool) error {
	if s.leasing() {
		return nil
	}
	owner := max(s.owner(), 1)
	for b := 0; b < pool.NumBlocks(); b++ {
		err := pool.LeaseBlockAt(owner, ipam.BlockID(b))
		if err != nil && !errors.Is(err, ipam.ErrInvalidBlock) { // a block of reserved addresses only
			return fmt.Errorf("leasing block %d: %w", b, err)
		}
	}
	return nil
}

// noBlockFree builds the error for a network this group has no free
// address of, and notes that a block is wanted.
func (s *State) noBlockFree(nw *Network, err error) error {
	if !s.leasing() {
		return err
	}
	if why := s.in.full[nw.ID]; why != "" {
		return fmt.Errorf("%w: %s", ipam.ErrExhausted, why)
	}
	s.in.wanted = true
	return waitBlock{fmt.Sprintf("network %q has no free address leased to this service's group yet; the cluster group is asked for one",
		nw.Name)}
}

// BlockWant is how many more addresses of a network a service group needs
// than its leased blocks have free.
type BlockWant struct {
	Network NetworkID
	Count   uint32
}

// BlockWants lists, by network, the addresses this service group's
// waiting tasks and pending VIPs need beyond what its blocks have free.
// Empty with one service group (it leases whole networks).
func (s *State) BlockWants() []BlockWant {
	if !s.leasing() || s.cfg.Group == 0 {
		return nil
	}
	need := s.blockNeeds()
	var out []BlockWant
	for _, id := range sortedKeys(need) {
		if p := s.pools[id]; p != nil {
			if free := p.FreeIn(s.owner()); need[id] > free {
				out = append(out, BlockWant{Network: id, Count: uint32(min(need[id]-free, 1<<30))})
			}
		}
	}
	return out
}

// blockNeeds counts, by network, the addresses waiting tasks and services
// without their VIP need.
func (s *State) blockNeeds() map[NetworkID]int {
	need := map[NetworkID]int{}
	add := func(names []string, n int) {
		for _, name := range names {
			if nw := s.networkByName(name); nw != nil && n > 0 {
				need[nw.ID] += n
			}
		}
	}
	for id := range s.waitSvcs {
		svc := s.services[id]
		if svc == nil {
			continue
		}
		n := 0
		for _, tid := range svc.waitQ {
			if t := s.waitingTask(tid); t != nil && !t.Desired.Stopping() {
				n++
			}
		}
		add(svc.Spec.Networks, n)
	}
	for _, svc := range s.services {
		if !svc.Remove {
			add(s.missingVIPs(svc), 1)
		}
	}
	return need
}

// missingVIPs lists the networks of svc it has no VIP on yet.
func (s *State) missingVIPs(svc *Service) []string {
	var out []string
	for _, name := range svc.Spec.Networks {
		if nw := s.networkByName(name); nw != nil && len(s.pools[nw.ID].VIPs(uint64(svc.ID))) == 0 {
			out = append(out, name)
		}
	}
	return out
}

// Returnable reports whether this service group holds an empty block that
// nothing waits for: CmdReleaseBlocks would give it back.
func (s *State) Returnable() bool {
	if !s.leasing() || s.cfg.Group == 0 {
		return false
	}
	var need map[NetworkID]int
	for _, id := range sortedKeys(s.pools) {
		if len(s.pools[id].EmptyBlocks(s.owner())) == 0 {
			continue
		}
		if need == nil {
			need = s.blockNeeds()
		}
		if need[id] == 0 {
			return true
		}
	}
	return false
}

// Returning lists, by network, the blocks this service group released and
// the cluster group has not confirmed taking back.
func (s *State) Returning() map[NetworkID][]uint32 {
	out := make(map[NetworkID][]uint32, len(s.in.returning))
	for id, bs := range s.in.returning {
		out[id] = slices.Clone(bs)
	}
	return out
}

// releaseBlocks gives back this group's empty blocks of every network no
// waiting task or pending VIP needs. They leave the group's pool at once
// (nothing here allocates from them again) and wait in returning until the
// cluster group confirms taking them back.
func (s *State) releaseBlocks() Result {
	if s.cfg.Group == 0 {
		return reject(CodeInvalid, "the cluster group leases blocks; it has none to release")
	}
	if !s.leasing() {
		return Result{}
	}
	need := s.blockNeeds()
	n := 0
	for _, id := range sortedKeys(s.pools) {
		if need[id] > 0 {
			continue
		}
		empty := s.pools[id].EmptyBlocks(s.owner())
		if len(empty) == 0 {
			continue
		}
		p := s.poolW(id)
		for _, b := range empty {
			if p.ReleaseBlock(s.owner(), b) == nil {
				s.in.returning[id] = append(s.in.returning[id], uint32(b))
				n++
			}
		}
	}
	return Result{ID: uint64(n)}
}

// installGrant applies a grant (or a refusal) the cluster group sent.
func (s *State) installGrant(c *Command) Result {
	if c.Group != s.cfg.Group {
		return Result{} // another group's lease: nothing here changes
	}
	p := s.poolW(c.Network)
	if p == nil {
		return Result{}
	}
	if len(c.Blocks) == 0 {
		s.in.full[c.Network] = c.Message
	} else {
		delete(s.in.full, c.Network)
		for _, b := range c.Blocks {
			if err := p.LeaseBlockAt(s.owner(), ipam.BlockID(b)); err != nil {
				return reject(CodeNotAllowed, "installing block %d of network %d: %v", b, c.Network, err)
			}
		}
	}
	s.allocatePendingVIPs()
	s.retryWaiting = true
	return Result{}
}

// allocatePendingVIPs gives services their VIPs that waited for a block.
func (s *State) allocatePendingVIPs() {
	for _, id := range s.ServiceIDs() {
		if svc := s.services[id]; !svc.Remove && len(s.missingVIPs(svc)) > 0 {
			s.allocateVIPs(svc) // a VIP that still finds no address keeps waiting
		}
	}
}

// confirmReturn drops blocks the cluster group took back from returning.
func (s *State) confirmReturn(c *Command) Result {
	if c.Group != s.cfg.Group {
		return Result{}
	}
	left := s.in.returning[c.Network]
	left = slices.DeleteFunc(left, func(b uint32) bool { return slices.Contains(c.Blocks, b) })
	if len(left) == 0 {
		delete(s.in.returning, c.Network)
	} else {
		s.in.returning[c.Network] = left
	}
	return Result{}
}

// checkLeaseCmd checks a request or return the cluster group received.
func (s *State) checkLeaseCmd(c *Command) (*ipam.Pool, Result, bool) {
	if s.cfg.Group != 0 {
		return nil, reject(CodeInvalid, "%s goes to the cluster group", c.Kind), false
	}
	g := c.Group
	if g == 0 || int(g) >= len(s.ob.lastGrant) {
		return nil, reject(CodeInvalid, "group %d is not a service group of this cluster (1..%d)", g, len(s.ob.lastGrant)-1), false
	}
	if c.Seq >= s.ob.next {
		return nil, reject(CodeInvalid, "group %d names outbox entry %d, which does not exist yet", g, c.Seq), false
	}
	if c.Seq < s.ob.lastGrant[g] || c.Seq < s.ob.netGrant[leaseKey{g, c.Network}] {
		// Computed before the group applied our last answer to it about
		// this network.
		return nil, Result{Msg: "stale: sent before the group applied its last grant of this network"}, false
	}
	p := s.poolW(c.Network) // the caller changes it
	if p == nil {
		return nil, Result{Msg: "network no longer exists"}, false
	}
	return p, Result{}, true
}

// requestBlocks leases free blocks to a service group that needs Count
// more addresses, or tells it the network is full.
func (s *State) requestBlocks(c *Command) Result {
	p, r, ok := s.checkLeaseCmd(c)
	if !ok {
		return r
	}
	g, key := c.Group, leaseKey{c.Group, c.Network}
	bs := uint32(p.BlockSize())
	want := min(int((c.Count+bs-1)/bs), maxGrantBlocks)
	var blocks []uint32
	for range want {
		b, err := p.LeaseBlock(uint32(g))
		if err != nil {
			break
		}
		blocks = append(blocks, uint32(b))
	}
	grant := Command{Kind: CmdGrantBlocks, Group: g, Network: c.Network, Blocks: blocks}
	if len(blocks) == 0 {
		if _, told := s.ob.refused[key]; told || want == 0 {
			return Result{Msg: "network full; already told"}
		}
		s.ob.refused[key] = struct{}{}
		nw := s.networks[c.Network]
		grant.Message = fmt.Sprintf("network %q is full: all %d of its addresses are held by tasks and VIPs or quarantined until their nodes confirm them gone; remove tasks or services from it, or use a larger subnet",
			nw.Name, p.Size())
	} else {
		delete(s.ob.refused, key)
	}
	s.ob.netGrant[key] = s.appendOutbox(grant)
	return Result{ID: uint64(len(blocks))}
}

// returnBlocks takes back blocks a service group released and confirms it
// through the outbox.
func (s *State) returnBlocks(c *Command) Result {
	p, r, ok := s.checkLeaseCmd(c)
	if !ok {
		return r
	}
	back := 0
	for _, b := range c.Blocks {
		if p.ReleaseBlock(uint32(c.Group), ipam.BlockID(b)) == nil {
			back++
		}
	}
	if back > 0 {
		for k := range s.ob.refused {
			if k.network == c.Network {
				delete(s.ob.refused, k)
			}
		}
	}
	s.appendOutbox(Command{Kind: CmdReturnBlocks, Group: c.Group, Network: c.Network, Blocks: c.Blocks})
	return Result{ID: uint64(back)}
}

// leaseLegacyStripes records, in a cluster group loaded from a snapshot
// written before leases were kept here, the blocks service groups were
// given then: group k owned the blocks b with b mod Groups == k-1. The
// cluster group must not lease them again; the groups give back what they
// do not use.
func (s *State) leaseLegacyStripes() {
	if s.cfg.Group != 0 || !s.leasing() {
		return
	}
	n := s.groups()
	for _, id := range sortedKeys(s.pools) {
		p := s.poolW(id)
		for b := 0; b < p.NumBlocks(); b++ {
			_ = p.LeaseBlockAt(uint32(b%n+1), ipam.BlockID(b)) // a block of reserved addresses only stays unleased
		}
	}
}
