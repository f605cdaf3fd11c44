package engine

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"
)

// HandOver transfers the leadership of every group this replica leads to
// another replica, so that stopping it afterwards costs no election: a
// planned restart. Raft transfers only to a peer whose log has caught up
// (the leader brings it up to date first), and the peers tried are those
// whose Raft address answers, for each group the one that has answered
// this replica's heartbeats longest first (see heard). It returns once
// this replica leads no group, or with an error naming the groups still
// led when ctx ends or no peer took them within two election timeouts;
// the caller stops the replica either way.
func (e *Engine) HandOver(ctx context.Context) error {
	var targets []uint64
	var d net.Dialer
	peers := e.Peers()
	if len(peers) <= 1 {
		return nil // a replica alone: there is no one to hand over to
	}
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		if id == e.cfg.ReplicaID {
			continue
		}
		c, cancel := context.WithTimeout(ctx, 10*e.cfg.RTT)
		conn, err := d.DialContext(c, "tcp", peers[id])
		cancel()
		if err == nil {
			conn.Close()
			targets = append(targets, id)
		}
	}
	led := e.ledGroups()
	if len(led) == 0 {
		return nil
	}
	if len(targets) == 0 {
		return fmt.Errorf("engine: hand over groups %v: no peer answers", led)
	}
	// Each round asks, for every group still led here, one peer to take
	// it: first the group's best-ranked peer, the next round the next
	// one. Raft ignores a new request while a transfer is pending; a
	// transfer that fails leaves the group without writes until Raft
	// abandons it, an election timeout later. Asking again every few
	// round trips catches that moment at once.
	budget := e.cfg.Clock.Now().Add(2 * time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT)
	for round := 0; len(led) > 0; round++ {
		if round > 0 && e.cfg.Clock.Now().After(budget) {
			return fmt.Errorf("engine: hand over groups %v: no peer took them", led)
		}
		for _, g := range led {
			ranked := e.seen.rank(g, targets)
			_ = e.nh.RequestLeaderTransfer(shardID(g), ranked[round%len(ranked)])
		}
		deadline := e.cfg.Clock.Now().Add(handOverRound * e.cfg.RTT)
		for led = e.ledGroups(); len(led) > 0 && e.cfg.Clock.Now().Before(deadline); led = e.ledGroups() {
			if err := e.pause(ctx); err != nil {
				return fmt.Errorf("engine: hand over groups %v: %w", led, err)
			}
		}
	}
	// A replica that goes away while its peers still take it for a
	// group's leader makes them campaign at once (leaderGone); one that
	// handed its groups over stays quiet until they heard the new leaders.
	select {
	case <-ctx.Done():
	case <-e.cfg.Clock.After(handOverQuiet * time.Duration(e.cfg.HeartbeatRTT) * e.cfg.RTT):
	}
	return nil
}

// pause waits a quarter of an RTT, or returns ctx's error.
func (e *Engine) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-e.cfg.Clock.After(e.cfg.RTT / 4):
		return nil
	}
}

// handOverRound is how many RTTs a peer asked to take a group's leadership
// has before the next peer is asked.
const handOverRound = 5

// answerGap is how many heartbeat intervals a peer may go without
// answering before it no longer counts as answering.
const answerGap = 3

// ledGroups lists the groups this replica leads as far as it knows.
func (e *Engine) ledGroups() []int {
	var led []int
	for g := 0; g <= e.cfg.Groups; g++ {
		if id, ok := e.Leader(g); ok && id == e.cfg.ReplicaID {
			led = append(led, g)
		}
	}
	return led
}
