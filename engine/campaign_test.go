package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// A replica alone leads every group long before its election timeout
// could fire, on first start and on a restart with entries to replay.
func TestReplicaAloneLeadsAtOnce(t *testing.T) {
	cfg := testConfig(4)
	cfg.DataDir = t.TempDir()
	cfg.RTT = 50 * time.Millisecond
	cfg.ElectionRTT = 400 // 20 s: the earliest a group could elect on its own
	for start := range 2 {
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = e.WaitReady(ctx)
		cancel()
		if err != nil {
			e.Close()
			t.Fatalf("start %d: not every group led 10s after the start: %v", start+1, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		_, err = e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: fmt.Sprintf("web%d", start), Replicas: 1}})
		cancel()
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The survivors also campaign at once when they learn of the leader's
// departure a while after its last heartbeat (a loaded leader's
// heartbeats come late, and so does the notice): here heartbeats 20 ms
// apart, and Stop closing the transport only after the groups stopped.
func TestSurvivorsElectAtOnceAfterALateNotice(t *testing.T) { survivorsElectAtOnce(t, 2) }

// When the leader's process is gone (its Raft port refuses connections),
// the survivors elect a leader in every group it led long before their
// election timeout could fire. Stop closes the Raft transport only after
// it stopped the groups (a kill closes everything at once): heartbeats
// 300 ms apart leave the last one fresh when the transport goes.
func TestSurvivorsElectAtOnceWhenTheLeaderIsGone(t *testing.T) { survivorsElectAtOnce(t, 30) }

// survivorsElectAtOnce stops the cluster group's leader of three replicas
// (heartbeats heartbeatRTT RTTs of 10 ms apart) and requires the others to
// lead every group within 2 s, before their 3 s election timeout.
func survivorsElectAtOnce(t *testing.T, heartbeatRTT uint64) {
	cfg := testConfig(2)
	cfg.RTT = 10 * time.Millisecond
	cfg.ElectionRTT = 300 // 3 s: the earliest a survivor could elect on its own
	cfg.HeartbeatRTT = heartbeatRTT
	l := startLocal(t, 3, cfg)
	old, ok := l.Engine(1).Leader(route.ClusterGroup)
	if !ok {
		t.Fatal("no cluster-group leader after WaitReady")
	}
	l.Stop(old)
	var rest []*Engine
	for _, e := range l.Engines() {
		rest = append(rest, e)
	}
	eventually(t, 2*time.Second, func() (bool, string) {
		for _, e := range rest {
			for g := 0; g <= cfg.Groups; g++ {
				if id, ok := e.Leader(g); !ok || id == old {
					return false, fmt.Sprintf("replica %d: group %d led by %d (known %v); replica %d is gone", e.ReplicaID(), g, id, ok, old)
				}
			}
		}
		return true, ""
	})
}

// The survivors of a gone leader take turns campaigning in ID order, one
// per attempt; on its turn a member leaves be an election it supports
// (it gave another survivor its vote or pre-vote lately), since a
// campaign at the same term would split the vote; a vote it gave the gone
// leader changes nothing.
func TestTurnLeavesAnElectionItSupportsBe(t *testing.T) {
	o := orphan{leader: 3, others: []uint64{1, 2}}
	for _, c := range []struct {
		attempt       int
		self, grantee uint64
		gave          bool
		want          int
	}{
		{0, 1, 0, false, turnCampaign},
		{0, 2, 0, false, turnWait},
		{1, 2, 0, false, turnCampaign},
		{0, 1, 2, true, turnLeave},     // 1 supports 2's election
		{0, 1, 2, false, turnCampaign}, // it did, long ago
		{0, 1, 3, true, turnCampaign},  // it voted for the gone leader
		{0, 2, 1, true, turnWait},      // not its turn anyway
		{2, 1, 2, true, turnLeave},
	} {
		if got := o.turn(c.attempt, c.self, c.grantee, c.gave); got != c.want {
			t.Errorf("attempt %d, replica %d, vote given to %d (%v): %d, want %d", c.attempt, c.self, c.grantee, c.gave, got, c.want)
		}
	}
}

// The next survivor's turn comes half an election timeout after the
// last, never sooner than a hand-over round: a campaign slowed by a busy
// machine is not tied by the next member's at the same term.
func TestNudgeGapIsHalfAnElectionTimeout(t *testing.T) {
	for _, c := range []struct {
		rtt         time.Duration
		electionRTT uint64
		want        time.Duration
	}{
		{20 * time.Millisecond, 100, time.Second},                         // 2 s election timeout
		{20 * time.Millisecond, 25, 250 * time.Millisecond},               // the default 500 ms
		{20 * time.Millisecond, 6, handOverRound * 20 * time.Millisecond}, // a round at least
	} {
		if got := nudgeGap(c.rtt, c.electionRTT); got != c.want {
			t.Errorf("RTT %v, election %d RTTs: gap %v, want %v", c.rtt, c.electionRTT, got, c.want)
		}
	}
}
