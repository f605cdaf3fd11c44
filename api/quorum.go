package api

import (
	"sync"
	"time"

	"shoal/engine"
	"shoal/wire"
)

// quorumCheck is how often a replica looks at its contact with the
// cluster group's quorum.
const quorumCheck = 250 * time.Millisecond

// quorumWatch follows this replica's contact with the cluster group's
// quorum (engine.Contact): while it has none, parked assignment polls end
// and new ones are refused with no_quorum, so agents move to a manager
// that can give them new work instead of waiting out their poll on one
// cut off from the cluster.
type quorumWatch struct {
	sync.Mutex
	lost chan struct{} // closed when contact is lost
	gone bool          // contact lost (lost is closed)
}

// state returns the channel closed when contact is next lost, and
// whether there is contact now.
func (q *quorumWatch) state() (lost <-chan struct{}, ok bool) {
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
		c := s.e.Contact(engine.ClusterGroup)
		q := &s.quorum
		q.Lock()
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
		q.Unlock()
	}
}

// noQuorum answers an agent's call this replica cannot serve usefully.
func (s *Server) noQuorum() error {
	leader, _ := s.e.LeaderNotice(engine.ClusterGroup)
	return &wire.Error{Code: wire.CodeNoQuorum, Leader: s.managerAddr(leader),
		Message: "this manager cannot reach a quorum of the cluster; ask another manager"}
}
