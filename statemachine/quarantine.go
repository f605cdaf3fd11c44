package statemachine

import (
	"fmt"
	"maps"
	"slices"
)

// The networks with addresses in quarantine on each node (State.quarNets).
// Every change to a pool's quarantine goes through releaseAddresses,
// nodeSync, expireNode or deletePool, which note what the pool then holds
// for the node; a decoded state lists them afresh from its pools.

// noteQuarantine updates node's list of networks with quarantine for
// network id after a change to its pool (or its deletion). A list is
// never changed in place, so clones share lists, and a caller may range
// over a node's list while it frees what is quarantined there.
func (s *State) noteQuarantine(node NodeID, id NetworkID) {
	has := false
	if p := s.pools[id]; p != nil {
		has = p.QuarantinedOn(uint32(node)) > 0
	}
	l := s.quarNets[node]
	i, found := slices.BinarySearch(l, id)
	switch {
	case has && !found:
		l = slices.Insert(slices.Clip(l), i, id)
	case !has && found:
		l = slices.Delete(slices.Clone(l), i, i+1)
	default:
		return
	}
	if len(l) == 0 {
		delete(s.quarNets, node)
		return
	}
	if s.quarNets == nil {
		s.quarNets = make(map[NodeID][]NetworkID)
	}
	s.quarNets[node] = l
}

// relistQuarantine sets the per-node lists from the pools.
func (s *State) relistQuarantine() {
	s.quarNets = s.listPoolsQuarantine()
}

// listPoolsQuarantine lists, per node, the networks whose pools hold an
// address in quarantine on it, ascending (nil when there are none).
func (s *State) listPoolsQuarantine() map[NodeID][]NetworkID {
	var m map[NodeID][]NetworkID
	for _, id := range sortedKeys(s.pools) {
		for _, n := range s.pools[id].QuarantineNodes() {
			if m == nil {
				m = make(map[NodeID][]NetworkID)
			}
			m[NodeID(n)] = append(m[NodeID(n)], id)
		}
	}
	return m
}

// checkQuarantineLists compares the kept per-node lists with the pools.
func (s *State) checkQuarantineLists() []error {
	want := s.listPoolsQuarantine()
	if maps.EqualFunc(s.quarNets, want, slices.Equal) {
		return nil
	}
	var errs []error
	for _, n := range sortedKeys(want) {
		if !slices.Equal(s.quarNets[n], want[n]) {
			errs = append(errs, fmt.Errorf("node %d lists quarantine in networks %v but the pools hold it in %v", n, s.quarNets[n], want[n]))
		}
	}
	for _, n := range sortedKeys(s.quarNets) {
		if _, ok := want[n]; !ok {
			errs = append(errs, fmt.Errorf("node %d lists quarantine in networks %v but the pools hold none", n, s.quarNets[n]))
		}
	}
	return errs
}
