package statemachine

import (
	"maps"
	"slices"
)

// Join keys make a worker's join idempotent across managers. A joiner
// names itself with a key (its certificate key and hostname, hashed) when
// the cluster group reserves its node ID; asked again with the same key
// (its answer was lost, or it timed out while a busy manager went on, or
// it asked another manager), the group hands back the same ID, so the
// fleet joins as one node per joiner instead of leaving nodes that never
// heartbeat. A key is forgotten when its node is removed.

// reserveKeyed returns the node ID already reserved for key, if any.
func (s *State) reserveKeyed(key string) (NodeID, bool) {
	id, ok := s.joinKeys[key]
	if !ok || s.isRemoved(id) {
		return 0, false
	}
	return id, true
}

// forgetJoinKeys drops the keys that reserved node id.
func (s *State) forgetJoinKeys(id NodeID) {
	for k, v := range s.joinKeys {
		if v == id {
			delete(s.joinKeys, k)
		}
	}
}

// encodeJoinKeys writes the join keys: the end of format 5, which the
// formats before it lack.
func (s *State) encodeJoinKeys(e *encoder) {
	keys := slices.Sorted(maps.Keys(s.joinKeys))
	e.u(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.u(uint64(s.joinKeys[k]))
	}
}

func (s *State) decodeJoinKeys(d *decoder) {
	var prev string
	for i := range d.count(2) {
		k := d.str()
		s.joinKeys[k] = NodeID(d.un(1<<32-1, "node id"))
		if i > 0 && k <= prev {
			d.fail("join keys out of order")
			return
		}
		prev = k
	}
}
