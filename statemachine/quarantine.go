package statemachine

import "fmt"

// The per-node count of quarantined addresses (State.quarOn). Every change
// to a pool's quarantine goes through releaseAddresses, nodeSync,
// expireNode or deletePool, which adjust the count by what the pool did;
// a decoded state counts its pools afresh.

// countQuarantine adds delta to node's count of quarantined addresses.
func (s *State) countQuarantine(node NodeID, delta int) {
	if delta == 0 {
		return
	}
	if s.quarOn == nil {
		s.quarOn = make(map[NodeID]int)
	}
	if n := s.quarOn[node] + delta; n != 0 {
		s.quarOn[node] = n
	} else {
		delete(s.quarOn, node)
	}
}

// recountQuarantine sets the per-node counts from the pools.
func (s *State) recountQuarantine() {
	s.quarOn = s.countPoolsQuarantine()
}

// countPoolsQuarantine counts each node's quarantined addresses over every
// pool (nil when there are none).
func (s *State) countPoolsQuarantine() map[NodeID]int {
	var m map[NodeID]int
	for _, p := range s.pools {
		for _, n := range p.QuarantineNodes() {
			if m == nil {
				m = make(map[NodeID]int)
			}
			m[NodeID(n)] += p.QuarantinedOn(n)
		}
	}
	return m
}

// checkQuarantineCounts compares the kept per-node counts with the pools.
func (s *State) checkQuarantineCounts() []error {
	want := s.countPoolsQuarantine()
	var errs []error
	for _, n := range sortedKeys(want) {
		if s.quarOn[n] != want[n] {
			errs = append(errs, fmt.Errorf("node %d counts %d quarantined addresses but the pools hold %d", n, s.quarOn[n], want[n]))
		}
	}
	for _, n := range sortedKeys(s.quarOn) {
		if _, ok := want[n]; !ok {
			errs = append(errs, fmt.Errorf("node %d counts %d quarantined addresses but the pools hold none", n, s.quarOn[n]))
		}
	}
	return errs
}
