package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Raft elects a leader once a follower has heard nothing from one for a
// randomized election timeout (one to two of them: 0.5-1 s at the
// defaults). This file starts the campaign at once in the two cases where
// waiting buys nothing, by handing this replica's own Raft a TimeoutNow,
// the message a leader sends to hand over, which to Raft is the clock
// moving forward (the Raft thesis, 3.10): campaigning is safe at any
// moment, only split votes cost time.

// campaignAlone makes every group whose only member is this replica elect
// it at once rather than after a randomized election timeout: a replica
// alone (dev mode, a one-replica cluster, its restarts) otherwise waited
// for the slowest of its groups' draws, about a second at the defaults.
// A group with other members is left to its election timeout: campaigns
// started together would split the vote. It retries every RTT
// (a campaign is skipped while the group still has committed entries to
// apply, as after a restart) until every such group has a leader or two
// election timeouts passed.
func (e *Engine) campaignAlone(deliver raftio.MessageHandler) {
	deadline := e.cfg.Clock.Now().Add(2 * time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT)
	for {
		info := e.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
		if info == nil {
			return // closed
		}
		var alone []uint64
		for _, si := range info.ShardInfoList {
			_, member := si.Replicas[e.cfg.ReplicaID]
			if !si.Pending && si.LeaderID == 0 && len(si.Replicas) == 1 && member {
				alone = append(alone, si.ShardID)
			}
		}
		e.campaign(deliver, alone)
		if e.allLed() || !e.cfg.Clock.Now().Before(deadline) || !e.idle(e.cfg.RTT) {
			return
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

// leaderGone is the transport's word that nothing listens any more at a
// peer's Raft address (raftnet.Factory.Gone): its process ended, as with
// kill -9 or a crash. In each group that peer still led — the last
// leader heard here, however long ago; a replica stopped on purpose
// handed its groups over and stayed quiet until its peers heard the new
// leaders (see HandOver) — the member with the lowest ID among the others campaigns
// as a hand-over's target does (its vote request passes the others'
// leader lease), once it applied what it knows to be committed. Every
// member decides alike from the membership, so one campaigns and the vote
// does not split; a member that already gave another survivor its vote
// (that survivor's own election timer fired) leaves that election be
// (orphan.turn). A candidate whose log is behind loses; every nudgeGap
// without a leader the next member in ID order is nudged, for at most an
// election timeout, after which the group's own
// election timeout has taken over. A peer that merely went quiet (a host
// or network failure) refuses nothing and changes nothing.
func (e *Engine) leaderGone(addr string) {
	if _, running := e.gone.LoadOrStore(addr, true); running {
		return
	}
	e.spawn(func() {
		defer e.gone.Delete(addr)
		e.campaignForGone(addr)
	})
}

func (e *Engine) campaignForGone(addr string) {
	deliver := e.local
	if deliver == nil {
		return
	}
	orphans := map[uint64]orphan{} // shard: the group the gone peer led
	deadline := e.cfg.Clock.Now().Add(time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT)
	for attempt := 0; ; attempt++ {
		info := e.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
		if info == nil {
			return // closed
		}
		var mine []uint64
		var stale []string  // groups where another spoke as the leader since
		var others []string // groups where another member's election is under way
		for _, si := range info.ShardInfoList {
			o, ok := orphans[si.ShardID]
			if attempt == 0 && !si.Pending && si.LeaderID != 0 && si.LeaderID != e.cfg.ReplicaID &&
				si.Replicas[si.LeaderID] == addr {
				// However long ago: a leader beside ten thousand agents
				// was last heard 1.1-2.1 s before its kill was noticed,
				// past any window short enough to matter.
				if e.seen.lastLeader(si.ShardID) == si.LeaderID {
					o = orphan{si.LeaderID, slices.DeleteFunc(slices.Sorted(maps.Keys(si.Replicas)),
						func(id uint64) bool { return id == si.LeaderID })}
					orphans[si.ShardID], ok = o, len(o.others) > 0
				} else {
					stale = append(stale, fmt.Sprint(groupOf(si.ShardID)))
				}
			}
			if !ok || (si.LeaderID != 0 && si.LeaderID != o.leader) {
				delete(orphans, si.ShardID) // led again
				continue
			}
			grantee, gave := e.seen.gaveVote(si.ShardID, time.Duration(e.cfg.ElectionRTT)*e.cfg.RTT)
			switch o.turn(attempt, e.cfg.ReplicaID, grantee, gave) {
			case turnCampaign:
				mine = append(mine, si.ShardID)
			case turnLeave:
				if attempt == 0 {
					others = append(others, fmt.Sprint(groupOf(si.ShardID)))
				}
			}
		}
		if attempt == 0 && (len(orphans) > 0 || len(stale) > 0) {
			e.cfg.Logf("engine: the replica at %s is gone; it led %d groups, this replica campaigns in %d of them now; another leader was heard since in groups %v; another member's election was under way in groups %v",
				addr, len(orphans), len(mine), stale, others)
		}
		e.campaign(deliver, mine)
		if len(orphans) == 0 || !e.cfg.Clock.Now().Before(deadline) || !e.idle(nudgeGap(e.cfg.RTT, e.cfg.ElectionRTT)) {
			return
		}
	}
}

// orphan is a group whose leader is gone: that leader, and the other
// members by ID, who take turns campaigning.
type orphan struct {
	leader uint64
	others []uint64
}

// A member's part in an orphaned group at one attempt.
const (
	turnWait     = iota // another member's turn
	turnCampaign        // this replica's turn: it campaigns
	turnLeave           // its turn, but another member is campaigning already
)

// turn is self's part in o at attempt: the members take turns in ID
// order, one per attempt; but while another survivor's own election is
// under way with self's support (self gave it its vote or pre-vote since
// the leader last spoke, within an election timeout: gave), self leaves
// that election be. A campaign of self's at the same term would split the
// vote, and every member would then wait out its election timeout (seen
// beside 10,000 agents, where a starved follower's election timer fired
// just as the leader died: its election and the immediate campaign tied,
// and the group had no leader for 5 s). A vote request self did not grant
// (in its leader lease Raft drops it; or the asker's log is behind)
// changes nothing: self campaigns on its turn. Should the election self
// supports fail all the same, the group waits for Raft's own election
// timeout, as it did before any immediate campaign.
func (o orphan) turn(attempt int, self, grantee uint64, gave bool) int {
	if o.others[attempt%len(o.others)] != self {
		return turnWait
	}
	if gave && grantee != o.leader {
		return turnLeave
	}
	return turnCampaign
}

// nudgeGap is how long the survivors of a gone leader give one member's
// campaign before the next member's turn: half an election timeout, at
// least a hand-over round. A campaign ends within a round trip on an idle
// machine, but beside 10,000 agents the vote requests took hundreds of
// milliseconds to arrive, and a turn every five RTTs (100 ms) made the
// next member campaign at the same term before it had heard the first:
// a split vote, and the group waited out Raft's election timeout.
func nudgeGap(rtt time.Duration, electionRTT uint64) time.Duration {
	return max(handOverRound*rtt, time.Duration(electionRTT)*rtt/2)
}

// idle waits d on the engine's clock; false if the engine closed first.
func (e *Engine) idle(d time.Duration) bool {
	select {
	case <-e.done:
		return false
	case <-e.cfg.Clock.After(d):
		return true
	}
}

// handOverQuiet is, in heartbeat intervals, how long a replica that
// handed its groups over stays quiet before it stops: long enough for its
// peers to hear the new leaders, so that its departure does not make them
// campaign (leaderGone).
const handOverQuiet = 3

// campaign hands this replica's Raft a TimeoutNow in each shard, each
// once this replica applied what it knows to be committed there, as a
// hand-over's target does (holdTimeoutNow): Raft skips the campaign before.
func (e *Engine) campaign(deliver raftio.MessageHandler, shards []uint64) {
	for _, sh := range shards {
		b := pb.MessageBatch{BinVer: raftio.TransportBinVersion, DeploymentId: e.deployment, Requests: []pb.Message{
			{Type: pb.TimeoutNow, ShardID: sh, To: e.cfg.ReplicaID, From: e.cfg.ReplicaID}}}
		e.spawn(func() {
			start := e.cfg.Clock.Now()
			e.holdTimeoutNow(b, deliver)
			if held := e.cfg.Clock.Now().Sub(start); held >= e.cfg.RTT {
				e.cfg.Logf("engine: group %d: this replica campaigns %v late, once it applied what it knew to be committed",
					groupOf(sh), held.Round(time.Millisecond))
			}
		})
	}
}
