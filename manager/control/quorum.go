package control

import (
	"sync"
	"time"

	"shoal/route"
	"shoal/wire"
)

// QuorumCheck is how often the caller should call CheckQuorum: how late a
// replica cut off from the cluster group's quorum may notice it.
const QuorumCheck = 250 * time.Millisecond

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
func (s *Stream) quorumState() (lost <-chan struct{}, ok bool) {
	q := &s.quorum
	q.Lock()
	gone := q.gone
	q.Unlock()
	if gone {
		s.CheckQuorum()
	}
	q.Lock()
	defer q.Unlock()
	return q.lost, !q.gone
}

// CheckQuorum looks at this replica's contact with the cluster group's
// quorum and ends the parked polls when it was lost. The API calls it
// every QuorumCheck.
func (s *Stream) CheckQuorum() {
	c := s.leaders.Contact(route.ClusterGroup)
	q := &s.quorum
	q.Lock()
	defer q.Unlock()
	switch {
	case !c.OK && !q.gone:
		q.gone = true
		close(q.lost)
		s.logf("api: this manager lost contact with the cluster's quorum (last heard from its leader %s ago); agents are sent elsewhere", c.LastContact.Round(time.Millisecond))
	case c.OK && q.gone:
		q.gone = false
		q.lost = make(chan struct{})
		s.logf("api: this manager is in contact with the cluster's quorum again")
	}
}

// noQuorum answers an agent's call this replica cannot serve usefully.
func (s *Stream) noQuorum() error {
	leader, _ := s.leaders.LeaderNotice(route.ClusterGroup)
	return &wire.Error{Code: wire.CodeNoQuorum, Leader: s.managerAddr(leader),
		Message: "this manager cannot reach a quorum of the cluster; ask another manager"}
}
