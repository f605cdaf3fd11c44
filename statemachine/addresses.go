package statemachine

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"shoal/ipam"
)

// Addresses follow DESIGN.md: a task gets one address per network when the
// allocator moves it new → pending; it holds them until it is confirmed
// terminal, when they go to quarantine tagged with (node, the node's
// assignment sequence); they are freed by a node sync at or past that
// sequence that no longer lists the task, or when the node stays down past
// the orphan timeout. A task deleted before it reached a node frees its
// addresses at once. A service's VIPs are freed only when the service is
// deleted, after its last task.
//
// Every group holds a pool per network. Service groups own the blocks the
// cluster group leased them (lease.go), so allocation never crosses groups;
// the cluster group allocates nothing and keeps the leases.

// networkByName finds a network by its (unique) name through the name
// index (this is on every task's allocation path).
func (s *State) networkByName(name string) *Network {
	return s.networks[s.networkNames[name]]
}

// owner is this group's block owner number in every pool.
func (s *State) owner() uint32 { return uint32(s.cfg.Group) }

func (s *State) groups() int {
	if s.cfg.Groups <= 0 {
		return 1
	}
	return s.cfg.Groups
}

func (s *State) createNetwork(spec *Network) Result {
	if spec == nil || spec.ID == 0 {
		return reject(CodeInvalid, "a network needs a non-zero ID")
	}
	if !validName(spec.Name) {
		return reject(CodeInvalid, "network name %q: use 1-%d letters, digits, '-' or '_'", spec.Name, maxNameLen)
	}
	if s.networks[spec.ID] != nil || s.networkByName(spec.Name) != nil {
		return reject(CodeExists, "network %q (id %d) already exists", spec.Name, spec.ID)
	}
	if spec.ID >= s.nextNetwork {
		s.nextNetwork = spec.ID + 1
	}
	prefix, err := netip.ParsePrefix(spec.Subnet)
	if err != nil {
		return reject(CodeInvalid, "network %q: %v: %q is not a CIDR such as 10.1.0.0/16", spec.Name, ipam.ErrInvalidCIDR, spec.Subnet)
	}
	var existing []netip.Prefix
	for _, id := range sortedKeys(s.pools) {
		existing = append(existing, s.pools[id].Prefix())
	}
	if err := ipam.CheckOverlap(existing, prefix); err != nil {
		return reject(CodeInvalid, "network %q: %v", spec.Name, err)
	}
	var reserved []ipam.Range
	for _, r := range spec.Reserved {
		first, last, _ := strings.Cut(r, "-")
		if last == "" {
			last = first
		}
		a, err1 := netip.ParseAddr(first)
		b, err2 := netip.ParseAddr(last)
		if err1 != nil || err2 != nil {
			return reject(CodeInvalid, "network %q: reserved range %q is not an address or first-last range", spec.Name, r)
		}
		reserved = append(reserved, ipam.Range{First: a, Last: b})
	}
	pool, err := ipam.New(ipam.Config{Name: spec.Name, Subnet: prefix, Reserved: reserved,
		BlockSize: blockSize(prefix, s.groups())})
	if err != nil {
		return reject(CodeInvalid, "network %q: %v", spec.Name, err)
	}
	if err := s.leaseInitial(pool); err != nil {
		return reject(CodeInvalid, "network %q: %v", spec.Name, err)
	}
	nw := *spec
	nw.Reserved = slices.Clone(spec.Reserved)
	s.networks[nw.ID] = &nw
	s.networkNames[nw.Name] = nw.ID
	s.setPool(nw.ID, pool)
	return Result{ID: uint64(nw.ID)}
}

func (s *State) removeNetwork(name string) Result {
	nw := s.networkByName(name)
	if nw == nil {
		return reject(CodeNotFound, "network %q does not exist", name)
	}
	for _, id := range s.ServiceIDs() {
		if slices.Contains(s.services[id].Spec.Networks, name) {
			return reject(CodeNotAllowed, "network %q is used by service %q; remove or update it first", name, s.services[id].Spec.Name)
		}
	}
	if p := s.pools[nw.ID]; p != nil && (p.Held() > 0 || p.Quarantined() > 0) {
		return reject(CodeNotAllowed, "network %q still has %d held and %d quarantined addresses; wait until tasks are gone and their nodes have synced",
			name, p.Held(), p.Quarantined())
	}
	if p := s.pools[nw.ID]; p != nil && s.cfg.Group == 0 && s.leasing() && p.Leased() > 0 {
		return reject(CodeNotAllowed, "network %q is still in use: %d of its address blocks are leased to services' groups; remove the services on it, wait until their tasks are gone and their nodes have synced, then retry",
			name, p.Leased())
	}
	delete(s.networks, nw.ID)
	delete(s.networkNames, nw.Name)
	s.deletePool(nw.ID)
	return Result{ID: uint64(nw.ID)}
}

// allocateVIPs gives svc a VIP on each of its networks it has none on yet.
func (s *State) allocateVIPs(svc *Service) Result {
	if s.owner() == 0 {
		return Result{}
	}
	for _, name := range svc.Spec.Networks {
		nw := s.networkByName(name)
		if len(s.pools[nw.ID].VIPs(uint64(svc.ID))) > 0 {
			continue
		}
		if _, err := s.poolW(nw.ID).AllocateVIP(s.owner(), uint64(svc.ID)); err != nil {
			if err = s.noBlockFree(nw, err); errors.Is(err, errWaitBlock) {
				continue // the VIP comes with the block (allocatePendingVIPs)
			}
			return reject(CodeNotAllowed, "service %q: VIP on network %q: %v", svc.Spec.Name, name, err)
		}
	}
	return Result{}
}

func (s *State) releaseVIPs(svc *Service) {
	for _, id := range sortedKeys(s.pools) {
		if len(s.pools[id].VIPs(uint64(svc.ID))) > 0 {
			s.poolW(id).ReleaseVIP(uint64(svc.ID))
		}
	}
}

// allocateAddresses gives t one address per network of its service. On
// failure it holds nothing and says why.
func (s *State) allocateAddresses(t *Task) error {
	svc := s.services[t.Service]
	if svc == nil || len(svc.Spec.Networks) == 0 {
		return nil
	}
	if s.owner() == 0 {
		return fmt.Errorf("%w: the cluster group holds no tasks", ErrNotAllowed)
	}
	for _, name := range svc.Spec.Networks {
		if err := s.fullNets[name]; err != nil {
			return err
		}
	}
	atts := t.attachmentsRoom(len(svc.Spec.Networks))
	for _, name := range svc.Spec.Networks {
		nw := s.networkByName(name)
		if nw == nil {
			s.freeAttachments(t.ID, atts)
			return fmt.Errorf("%w: network %q does not exist", ErrNotFound, name)
		}
		var a netip.Addr
		var err error
		if s.leasing() && !s.pools[nw.ID].HasFree(s.owner()) {
			// Waiting for a block: noBlockFree drops the pool's exhaustion
			// error, which counts held and quarantined addresses.
			err = ipam.ErrExhausted
		} else {
			a, err = s.poolW(nw.ID).Allocate(s.owner(), uint64(t.ID))
		}
		if err != nil {
			s.freeAttachments(t.ID, atts)
			if errors.Is(err, ipam.ErrExhausted) {
				s.refusals++
				err = s.noBlockFree(nw, err)
				if s.fullNets != nil {
					s.fullNets[name] = err
				}
			}
			return err
		}
		atts = append(atts, Attachment{Network: nw.ID, Addr: addrU32(a)})
	}
	s.keepTask(t)
	t.Attachments = atts
	return nil
}

// freeAttachments frees at once addresses no node ever saw.
func (s *State) freeAttachments(id TaskID, atts []Attachment) {
	for _, at := range atts {
		if p := s.poolW(at.Network); p != nil {
			_ = p.FreeUnassigned(u32Addr(at.Addr), uint64(id)) // not held: nothing to free
		}
	}
}

// releaseAddresses puts a terminal task's addresses into quarantine on its
// node, tagged with the node's assignment sequence after this change.
func (s *State) releaseAddresses(t *Task) {
	if len(t.Attachments) == 0 {
		return
	}
	if t.Node == 0 || s.cfg.seams.freesAtRelease() {
		// Never on a node: free at once, and tasks waiting for addresses
		// try again (a rolling update of unplaced tasks creates the
		// replacements before it frees the originals).
		s.freeAttachments(t.ID, t.Attachments)
		s.retryWaiting = true
		return
	}
	s.nodeChanged(t, EffSeqAdvanced)
	seq := uint64(0)
	if n := s.nodes[t.Node]; n != nil {
		seq = n.AssignSeq
	}
	for _, at := range t.Attachments {
		if p := s.poolW(at.Network); p != nil {
			if p.Release(u32Addr(at.Addr), uint64(t.ID), uint32(t.Node), seq) == nil { // already released: nothing to do
				s.noteQuarantine(t.Node, at.Network)
			}
		}
	}
	// The pool's counts changed, so the messages of tasks waiting for
	// addresses must give the new ones (nothing was freed, so nothing can
	// be allocated): the batch's retry refreshes them. With leased blocks
	// their messages name the network, not counts: nothing to refresh,
	// and a pass per batch over a hundred thousand waiting tasks was a
	// tenth of a replica's CPU in a million-task ramp.
	if !s.leasing() {
		s.retryWaiting = true
	}
}

// retryWaitingTasks makes the batch's pass over the waiting tasks if
// addresses were freed, granted or re-counted since the last one.
func (s *State) retryWaitingTasks() {
	if s.retryWaiting {
		s.retryWaiting = false
		s.retryAllocation()
	}
}

// checkAddresses checks invariant 6 and every pool's own invariants
// (with checkPool).
func (s *State) checkAddresses(checkPool func(*ipam.Pool) error) []error {
	var errs []error
	for _, id := range sortedKeys(s.pools) {
		if err := checkPool(s.pools[id]); err != nil {
			errs = append(errs, fmt.Errorf("network %d pool: %w", id, err))
		}
	}
	claims := map[[2]uint32]TaskID{}
	for _, id := range s.TaskIDs() {
		t := s.tasks.get(id)
		for _, at := range t.Attachments {
			p := s.pools[at.Network]
			if p == nil {
				errs = append(errs, fmt.Errorf("task %d has an address on network %d, which does not exist", id, at.Network))
				continue
			}
			a := u32Addr(at.Addr)
			if at.Released {
				continue // its node confirmed the release
			}
			h, ok := p.Holder(a)
			if !ok || h.Kind != ipam.KindTask || h.ID != uint64(id) {
				errs = append(errs, fmt.Errorf("inv6: task %d (%s) may still hold %s but the pool has it %s for %v",
					id, t.Status.State, a, poolState(p, a), h))
				continue
			}
			k := [2]uint32{uint32(at.Network), at.Addr}
			if other, dup := claims[k]; dup {
				errs = append(errs, fmt.Errorf("inv6: address %s held by tasks %d and %d", a, other, id))
			}
			claims[k] = id
		}
	}
	return errs
}

func poolState(p *ipam.Pool, a netip.Addr) string {
	st, err := p.State(a)
	if err != nil {
		return err.Error()
	}
	return st.String()
}

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func u32Addr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Pool returns the address pool of a network (nil if absent). The caller
// must not modify it.
func (s *State) Pool(id NetworkID) *ipam.Pool { return s.pools[id] }

// NetworkIDs returns every network ID in ascending order.
func (s *State) NetworkIDs() []NetworkID { return sortedKeys(s.networks) }

// Network returns a network by ID (nil if absent). The caller must not
// modify it.
func (s *State) Network(id NetworkID) *Network { return s.networks[id] }

// NetworkByName returns a network by name (nil if absent).
func (s *State) NetworkByName(name string) *Network { return s.networkByName(name) }
