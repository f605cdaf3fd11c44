package ipam

import (
	"fmt"
	"net/netip"
	"slices"
)

// qEntry is one quarantined address of a node: released at seq.
type qEntry struct {
	seq uint64
	off uint32
}

func (e qEntry) less(o qEntry) bool {
	return e.seq < o.seq || (e.seq == o.seq && e.off < o.off)
}

// nodeQueue holds a node's quarantined addresses sorted by (seq, offset).
// Releases usually arrive in sequence order, so inserting is an append.
type nodeQueue struct {
	entries []qEntry
}

func (q *nodeQueue) insert(e qEntry) {
	n := len(q.entries)
	if n == 0 || q.entries[n-1].less(e) {
		q.entries = append(q.entries, e)
		return
	}
	i, _ := slices.BinarySearchFunc(q.entries, e, func(a, b qEntry) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	})
	q.entries = slices.Insert(q.entries, i, e)
}

// QuarantineEntry describes one quarantined address.
type QuarantineEntry struct {
	Addr   netip.Addr
	Holder uint64 // the task that released it
	Seq    uint64 // the node's assignment sequence number at release
}

// StillHeld answers, for a node's sync report, whether the node still holds
// addr for holder. It must not call back into the Pool.
type StillHeld func(addr netip.Addr, holder uint64) bool

// Release moves task's address a from held to quarantine, tagged with the
// node that ran the task and that node's assignment sequence number at the
// release. The address stays unavailable until ConfirmSync or ExpireNode
// frees it. It fails with ErrNotHeld (and ErrQuarantined if a was already
// released) unless task holds a.
func (p *Pool) Release(a netip.Addr, task uint64, node uint32, seq uint64) error {
	off, err := p.checkTaskHolds(a, task)
	if err != nil {
		return err
	}
	p.held.Remove(off)
	p.quarantined.Add(off)
	p.nHeld--
	p.nQuar++
	q := p.nodes[node]
	if q == nil {
		q = &nodeQueue{}
		p.nodes[node] = q
	}
	q.insert(qEntry{seq: seq, off: off})
	return nil
}

// FreeUnassigned frees task's address a at once, skipping quarantine. Use it
// only for a task that never reached a node (deleted before `assigned`), so
// no container can hold the address. Errors as for Release.
func (p *Pool) FreeUnassigned(a netip.Addr, task uint64) error {
	off, err := p.checkTaskHolds(a, task)
	if err != nil {
		return err
	}
	p.held.Remove(off)
	p.nHeld--
	p.release(off)
	return nil
}

// checkTaskHolds returns a's offset if task holds a as a task address.
func (p *Pool) checkTaskHolds(a netip.Addr, task uint64) (uint32, error) {
	off, err := p.offset(a)
	if err != nil {
		return 0, err
	}
	switch p.stateAt(off) {
	case StateHeld:
	case StateQuarantined:
		return 0, fmt.Errorf("%w: %w: %s in network %s was already released by %s",
			ErrNotHeld, ErrQuarantined, a, p.label(), p.holderAt(off))
	default:
		return 0, fmt.Errorf("%w: %s in network %s is %s, not held by task %d", ErrNotHeld, a, p.label(), p.stateAt(off), task)
	}
	if h := p.holderAt(off); h != (Holder{KindTask, task}) {
		return 0, fmt.Errorf("%w: %s in network %s is held by %s, not task %d", ErrNotHeld, a, p.label(), h, task)
	}
	return off, nil
}

// ConfirmSync applies a node's sync report: the node has applied its
// assignment set up to seq and still holds what stillHeld reports (nil: it
// holds nothing). Every address the node released at a sequence number <= seq
// that it no longer holds is freed; addresses released after seq stay
// quarantined whatever the report says, because the report may predate them.
// It returns the freed addresses in (sequence, address) order.
func (p *Pool) ConfirmSync(node uint32, seq uint64, stillHeld StillHeld) []netip.Addr {
	q := p.nodes[node]
	if q == nil {
		return nil
	}
	// Entries are sorted by seq: only the prefix released at or before seq
	// is eligible.
	n, _ := slices.BinarySearchFunc(q.entries, seq, func(e qEntry, s uint64) int {
		if e.seq <= s {
			return -1
		}
		return 1
	})
	freed := make([]netip.Addr, 0, n)
	keep := q.entries[:0]
	for _, e := range q.entries[:n] {
		a := p.addr(e.off)
		if stillHeld != nil && stillHeld(a, p.holders.get(e.off)) {
			keep = append(keep, e)
			continue
		}
		p.unquarantine(e.off)
		freed = append(freed, a)
	}
	q.entries = append(keep, q.entries[n:]...)
	p.trimNode(node, q)
	return freed
}

// ExpireNode frees every address quarantined on node, for a node that stayed
// down past the orphan timeout: its containers are gone with it. It returns
// the freed addresses in (sequence, address) order.
func (p *Pool) ExpireNode(node uint32) []netip.Addr {
	q := p.nodes[node]
	if q == nil {
		return nil
	}
	freed := make([]netip.Addr, 0, len(q.entries))
	for _, e := range q.entries {
		p.unquarantine(e.off)
		freed = append(freed, p.addr(e.off))
	}
	delete(p.nodes, node)
	return freed
}

func (p *Pool) unquarantine(off uint32) {
	p.quarantined.Remove(off)
	p.nQuar--
	p.release(off)
}

// trimNode drops an empty queue and shrinks a mostly empty one.
func (p *Pool) trimNode(node uint32, q *nodeQueue) {
	switch n := len(q.entries); {
	case n == 0:
		delete(p.nodes, node)
	case cap(q.entries) > 64 && n < cap(q.entries)/4:
		q.entries = slices.Clone(q.entries)
	}
}

// QuarantinedOn returns how many addresses are in quarantine on node,
// without listing them.
func (p *Pool) QuarantinedOn(node uint32) int {
	if q := p.nodes[node]; q != nil {
		return len(q.entries)
	}
	return 0
}

// Quarantine lists the addresses quarantined on node in (sequence, address)
// order.
func (p *Pool) Quarantine(node uint32) []QuarantineEntry {
	q := p.nodes[node]
	if q == nil {
		return nil
	}
	out := make([]QuarantineEntry, len(q.entries))
	for i, e := range q.entries {
		out[i] = QuarantineEntry{Addr: p.addr(e.off), Holder: p.holders.get(e.off), Seq: e.seq}
	}
	return out
}

// QuarantineNodes lists, ascending, the nodes with quarantined addresses.
func (p *Pool) QuarantineNodes() []uint32 {
	out := make([]uint32, 0, len(p.nodes))
	for n := range p.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// VIPs lists service's virtual IPs in address order.
func (p *Pool) VIPs(service uint64) []netip.Addr {
	offs := p.services[service]
	out := make([]netip.Addr, len(offs))
	for i, off := range offs {
		out[i] = p.addr(off)
	}
	return out
}

// ReleaseVIP frees every virtual IP of service at once and returns them in
// address order. Call it only when the service is deleted, after its last
// task is gone.
func (p *Pool) ReleaseVIP(service uint64) []netip.Addr {
	offs := p.services[service]
	if len(offs) == 0 {
		return nil
	}
	out := make([]netip.Addr, len(offs))
	for i, off := range offs {
		p.held.Remove(off)
		p.vips.Remove(off)
		p.nHeld--
		p.release(off)
		out[i] = p.addr(off)
	}
	delete(p.services, service)
	return out
}
