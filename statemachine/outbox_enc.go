package statemachine

import (
	"cmp"
	"slices"
)

// The outbox and lease state in snapshots (format 3, after the tasks):
//
//	outbox: next, entry count, entries (seq, index, command)
//	acks, last grants: count, values by group
//	refused: count, (group, network) ascending
//	inbox: applied, index
//	returning: count, by ascending network: network, block count, blocks
//	full: count, by ascending network: network, message

func (s *State) encodeRedrive(e *encoder) {
	e.u(s.ob.next)
	e.u(uint64(len(s.ob.entries)))
	for i := range s.ob.entries {
		en := &s.ob.entries[i]
		e.u(en.Seq)
		e.u(en.Index)
		encodeCommand(e, &en.Cmd)
	}
	for _, list := range [][]uint64{s.ob.acks, s.ob.lastGrant} {
		e.u(uint64(len(list)))
		for _, v := range list {
			e.u(v)
		}
	}
	keys := s.refusedKeys()
	e.u(uint64(len(keys)))
	for _, k := range keys {
		e.u(uint64(k.group))
		e.u(uint64(k.network))
	}

	e.u(s.in.applied)
	e.u(s.in.index)
	ret := sortedKeys(s.in.returning)
	e.u(uint64(len(ret)))
	for _, id := range ret {
		e.u(uint64(id))
		e.u(uint64(len(s.in.returning[id])))
		for _, b := range s.in.returning[id] {
			e.u(uint64(b))
		}
	}
	full := sortedKeys(s.in.full)
	e.u(uint64(len(full)))
	for _, id := range full {
		e.u(uint64(id))
		e.str(s.in.full[id])
	}
	s.encodeNetGrants(e)
}

// encodeNetGrants writes the per-network grant fences: the end of format
// 4, which format 3 lacks.
func (s *State) encodeNetGrants(e *encoder) {
	grants := sortedLeaseKeys(s.ob.netGrant)
	e.u(uint64(len(grants)))
	for _, k := range grants {
		e.u(uint64(k.group))
		e.u(uint64(k.network))
		e.u(s.ob.netGrant[k])
	}
}

func (s *State) refusedKeys() []leaseKey {
	keys := make([]leaseKey, 0, len(s.ob.refused))
	for k := range s.ob.refused {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b leaseKey) int {
		if a.group != b.group {
			return int(a.group) - int(b.group)
		}
		switch {
		case a.network < b.network:
			return -1
		case a.network > b.network:
			return 1
		}
		return 0
	})
	return keys
}

// decodeRedrive reads what encodeRedrive wrote; v3 (format 3) has no
// per-network grant fences, so its per-group ones stay as floors.
func (s *State) decodeRedrive(d *decoder, v3 bool) {
	s.ob.next = d.u()
	n := d.count(3)
	s.ob.entries = make([]OutboxEntry, 0, n)
	for range n {
		en := OutboxEntry{Seq: d.u(), Index: d.u()}
		decodeCommandNested(d, &en.Cmd, true)
		if d.Err() != nil {
			return
		}
		if last := len(s.ob.entries); en.Seq >= s.ob.next || (last > 0 && en.Seq != s.ob.entries[last-1].Seq+1) {
			d.fail("outbox entries out of order")
			return
		}
		s.ob.entries = append(s.ob.entries, en)
	}
	for _, list := range []*[]uint64{&s.ob.acks, &s.ob.lastGrant} {
		vals := make([]uint64, d.count(1))
		for i := range vals {
			vals[i] = d.u()
		}
		if d.Err() == nil && len(vals) != len(*list) {
			d.fail("outbox group count differs from the configured groups")
			return
		}
		*list = vals
	}
	for range d.count(2) {
		k := leaseKey{group: uint16(d.un(1<<16-1, "group")), network: NetworkID(d.un(1<<32-1, "network id"))}
		s.ob.refused[k] = struct{}{}
	}

	s.in.applied = d.u()
	s.in.index = d.u()
	for range d.count(2) {
		id := NetworkID(d.un(1<<32-1, "network id"))
		bs := make([]uint32, d.count(1))
		for i := range bs {
			bs[i] = uint32(d.un(1<<32-1, "block"))
		}
		s.in.returning[id] = bs
	}
	for range d.count(2) {
		id := NetworkID(d.un(1<<32-1, "network id"))
		s.in.full[id] = d.str()
	}
	if !v3 {
		for range d.count(3) {
			k := leaseKey{group: uint16(d.un(1<<16-1, "group")), network: NetworkID(d.un(1<<32-1, "network id"))}
			s.ob.netGrant[k] = d.u()
		}
	}
}

// cloneReusing copies o into the space of old, an outbox nothing uses any
// more (the zero outbox: all new).
func (o outbox) cloneReusing(old outbox) outbox {
	c := o
	c.entries = sliceInto(old.entries, o.entries)
	c.acks = sliceInto(old.acks, o.acks)
	c.lastGrant = sliceInto(old.lastGrant, o.lastGrant)
	c.netGrant = mapInto(old.netGrant, o.netGrant)
	c.refused = mapInto(old.refused, o.refused)
	return c
}

// cloneReusing copies in into the space of old, an inbox nothing uses any
// more (the zero inbox: all new).
func (in inbox) cloneReusing(old inbox) inbox {
	c := in
	c.returning = mapFor(old.returning, len(in.returning))
	for id, bs := range in.returning {
		c.returning[id] = slices.Clone(bs)
	}
	c.full = mapInto(old.full, in.full)
	return c
}

func sortedLeaseKeys(m map[leaseKey]uint64) []leaseKey {
	keys := make([]leaseKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b leaseKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.network, b.network))
	})
	return keys
}
