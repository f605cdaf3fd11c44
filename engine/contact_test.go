package engine

import (
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"shoal/internal/clock"
	"shoal/route"
)

// A replica is in contact with a group's quorum while it leads the group,
// or while the group's leader spoke to it within three election timeouts;
// one that never heard a leader is not.
func TestContactFollowsTheLeadersWord(t *testing.T) {
	const rtt = 20 * time.Millisecond
	fc := clock.NewFake(time.Unix(1000, 0))
	e := &Engine{cfg: Config{ReplicaID: 3, RTT: rtt, ElectionRTT: 25, Clock: fc},
		seen: newHeard(2, 6*rtt, fc.Now), lead: newLeadership(3, 1, fc.Now)}
	defer e.lead.close()
	if c := e.Contact(route.ClusterGroup); c.OK || c.LastContact != -1 {
		t.Fatalf("before any leader spoke: %+v", c)
	}
	e.seen.observe(&pb.MessageBatch{Requests: []pb.Message{{Type: pb.Heartbeat, ShardID: shardID(route.ClusterGroup), From: 1}}})
	fc.Advance(1400 * time.Millisecond) // under 3 × 500ms
	if c := e.Contact(route.ClusterGroup); !c.OK || c.LastContact != 1400*time.Millisecond {
		t.Fatalf("1.4s after the leader spoke: %+v", c)
	}
	fc.Advance(200 * time.Millisecond)
	if c := e.Contact(route.ClusterGroup); c.OK {
		t.Fatalf("1.6s after the leader spoke: %+v, want out of contact", c)
	}
	e.lead.LeaderUpdated(raftio.LeaderInfo{ShardID: shardID(route.ClusterGroup), LeaderID: 3, Term: 2})
	if c := e.Contact(route.ClusterGroup); !c.OK || !c.Leading {
		t.Fatalf("leading: %+v", c)
	}
}
