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
// whose Raft address answers. It returns once this replica leads no group,
// or with an error naming the groups still led when ctx ends or no peer
// took them within two election timeouts; the caller stops the replica
// either way.
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
	// Each round asks one peer to take every group still led here; the
	// next round, a few round trips later, asks the next peer. Raft
	// ignores a new request while a transfer is pending, and a transfer
	// fails when its target has not applied everything it committed at
	// the moment the request reaches it (dragonboat's target then skips
	// the campaign) — likely while writes flow — after which the group
	// takes no writes until Raft abandons the transfer, an election
	// timeout later. Asking again every few round trips catches that
	// moment at once, to whichever peer's turn it is.
	budget := time.Now().Add(2 * time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT)
	for round := 0; len(led) > 0; round++ {
		if round > 0 && time.Now().After(budget) {
			return fmt.Errorf("engine: hand over groups %v: no peer took them", led)
		}
		to := targets[round%len(targets)]
		for _, g := range led {
			_ = e.nh.RequestLeaderTransfer(shardID(g), to)
		}
		deadline := time.Now().Add(handOverRound * e.cfg.RTT)
		for len(led) > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("engine: hand over groups %v: %w", led, ctx.Err())
			case <-e.cfg.Clock.After(e.cfg.RTT / 4):
			}
			led = e.ledGroups()
		}
	}
	return nil
}

// handOverRound is how many RTTs a peer asked to take a group's leadership
// has before the next peer is asked.
const handOverRound = 5

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
