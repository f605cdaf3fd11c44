package api

import (
	"sync"
	"time"

	"shoal/cluster"
	routing "shoal/route"
	"shoal/wire"
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

// quorumCheck is how often a replica looks at its contact with the
// cluster group's quorum.
const quorumCheck = 250 * time.Millisecond

// quorumWatch follows this replica's contact with the cluster group's
// quorum (Leaders.Contact): while it has none, parked assignment polls end
// and new ones are refused with no_quorum, so agents move to a manager
// that can give them new work instead of waiting out their poll on one
// cut off from the cluster.
type quorumWatch struct {
	sync.Mutex
	lost chan struct{} // closed when contact is lost
	gone bool          // contact lost (lost is closed)
}

// quorumState returns the channel closed when contact is next lost, and
// whether there is contact now. Contact regained is seen at once, not at
// the next check: a replica that just started, or whose link just came
// back, would otherwise turn agents away for a moment longer.
func (s *Server) quorumState() (lost <-chan struct{}, ok bool) {
	q := &s.quorum
	q.Lock()
	gone := q.gone
	q.Unlock()
	if gone {
		s.checkQuorum()
	}
	q.Lock()
	defer q.Unlock()
	return q.lost, !q.gone
}

func (s *Server) watchQuorum() {
	for {
		select {
		case <-s.cfg.Clock.After(quorumCheck):
		case <-s.closed:
			return
		}
		s.checkQuorum()
	}
}

// checkQuorum looks at this replica's contact with the cluster group's
// quorum and ends the parked polls when it was lost.
func (s *Server) checkQuorum() {
	c := s.leaders.Contact(routing.ClusterGroup)
	q := &s.quorum
	q.Lock()
	defer q.Unlock()
	switch {
	case !c.OK && !q.gone:
		q.gone = true
		close(q.lost)
		s.cfg.Logf("api: this manager lost contact with the cluster's quorum (last heard from its leader %s ago); agents are sent elsewhere", c.LastContact.Round(time.Millisecond))
	case c.OK && q.gone:
		q.gone = false
		q.lost = make(chan struct{})
		s.cfg.Logf("api: this manager is in contact with the cluster's quorum again")
	}
}

// noQuorum answers an agent's call this replica cannot serve usefully.
func (s *Server) noQuorum() error {
	leader, _ := s.leaders.LeaderNotice(routing.ClusterGroup)
	return &wire.Error{Code: wire.CodeNoQuorum, Leader: s.managerAddr(leader),
		Message: "this manager cannot reach a quorum of the cluster; ask another manager"}
}
