package manager

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"shoal/engine"
)

// waitQuorum waits until every group has a leader. While it waits it says,
// in one line and again only when the answer changes, which peers do not
// answer on their Raft address (dragonboat's own line per second per peer
// is silenced at the default log level).
func waitQuorum(ctx context.Context, e *engine.Engine, say func(string)) error {
	peers := e.Peers()
	said := ""
	// Leaders are looked for every Raft round trip; a healthy start gets
	// its election (a second) before the line naming silent peers, which
	// is then checked every 250ms and printed when it changes.
	wait := time.Second
	for {
		c, cancel := context.WithTimeout(ctx, wait)
		err := e.WaitReady(c)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(peers) > 1 {
			if line := waitingLine(ctx, e.ReplicaID(), peers); line != said && line != "" {
				say(line)
				said = line
			}
		}
		wait = 250 * time.Millisecond
	}
}

// waitingLine says which peers do not answer on their Raft address.
func waitingLine(ctx context.Context, self uint64, peers map[uint64]string) string {
	var silent []string
	var d net.Dialer
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		if id == self {
			continue
		}
		c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		conn, err := d.DialContext(c, "tcp", peers[id])
		cancel()
		if err != nil {
			silent = append(silent, fmt.Sprintf("replica %d at %s", id, peers[id]))
			continue
		}
		conn.Close()
	}
	quorum := len(peers)/2 + 1
	if len(silent) == 0 {
		return fmt.Sprintf("waiting for leaders: every peer answers (%s); an election is under way",
			engine.FormatPeers(peers))
	}
	return fmt.Sprintf("waiting for a quorum (%d of %d replicas): no answer from %s; start them, or check --peers if an address is wrong",
		quorum, len(peers), strings.Join(silent, ", "))
}
