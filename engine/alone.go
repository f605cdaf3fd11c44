package engine

import (
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// campaignAlone makes every group whose only member is this replica elect
// it at once rather than after a randomized election timeout: a replica
// alone (dev mode, a one-replica cluster, its restarts) otherwise waited
// for the slowest of its groups' draws between one and two election
// timeouts, about a second at the defaults. It hands the replica's own
// Raft a TimeoutNow, the message a leader sends to hand over, which to
// Raft is the clock moving forward at once; campaigning is safe at any
// moment. A group with other members is left to its election timeout:
// campaigns started together would split the vote. It retries every RTT
// (a campaign is skipped while the group still has committed entries to
// apply, as after a restart) until every such group has a leader or two
// election timeouts passed.
func (e *Engine) campaignAlone(deliver raftio.MessageHandler, deployment uint64) {
	deadline := e.cfg.Clock.Now().Add(2 * time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT)
	for {
		info := e.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
		if info == nil {
			return // closed
		}
		var nudge []pb.Message
		for _, si := range info.ShardInfoList {
			_, member := si.Replicas[e.cfg.ReplicaID]
			if si.Pending || si.LeaderID != 0 || len(si.Replicas) != 1 || !member {
				continue
			}
			nudge = append(nudge, pb.Message{Type: pb.TimeoutNow, ShardID: si.ShardID,
				To: e.cfg.ReplicaID, From: e.cfg.ReplicaID})
		}
		if len(nudge) > 0 {
			deliver(pb.MessageBatch{BinVer: raftio.TransportBinVersion, DeploymentId: deployment, Requests: nudge})
		}
		if e.allLed() || !e.cfg.Clock.Now().Before(deadline) {
			return
		}
		select {
		case <-e.done:
			return
		case <-e.cfg.Clock.After(e.cfg.RTT):
		}
	}
}

// allLed reports whether every group has a leader as far as this replica
// knows.
func (e *Engine) allLed() bool {
	for g := 0; g <= e.cfg.Groups; g++ {
		if _, ok := e.Leader(g); !ok {
			return false
		}
	}
	return true
}
