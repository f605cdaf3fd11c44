package api

import (
	"shoal/cluster"
	"shoal/manager/control"
)

// Leaders says who leads a group as this replica knows it: Leader (ok is
// false while none is known), LeaderNotice (the leader, 0 if none, and a
// channel closed at the next change), Contact (this replica's link to the
// group's quorum). The engine implements it.
type Leaders interface {
	Leader(group int) (replicaID uint64, ok bool)
	LeaderNotice(group int) (leader uint64, next <-chan struct{})
	Contact(group int) cluster.Contact
}

// watchQuorum has the assignment stream look at this replica's contact
// with the cluster group's quorum every control.QuorumCheck, until the
// server closes: parked polls end when it is lost.
func (s *Server) watchQuorum() {
	for {
		select {
		case <-s.cfg.Clock.After(control.QuorumCheck):
		case <-s.closed:
			return
		}
		s.stream.CheckQuorum()
	}
}
