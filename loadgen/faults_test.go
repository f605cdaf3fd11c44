package loadgen

import (
	"context"
	"io"
	"testing"
	"time"
)

// beats is an agents fleet that only answers HeartbeatsSince.
type beats struct {
	agents
	beaten []bool
}

func (b beats) HeartbeatsSince(time.Time) []bool { return b.beaten }

// The time for every agent to reach the new leader leaves out agents the
// loadgen itself faulted at or after the kill and agents that were not
// connected when it happened (their fault, not the failover, decides when
// they come back), and counts agents whose fault ended before it.
func TestReconnectTimeLeavesOutAgentsFaultedSinceTheKill(t *testing.T) {
	killed := time.Now()
	r := &run{cfg: Config{Agents: 4, Out: io.Discard}, start: killed,
		// Agent 0 never faulted, agent 2's fault ended before the kill:
		// both reached the new leader. Agent 1 vanished before the kill and
		// came back after it (its fault is over, so not in until): it has
		// not reached the new leader yet. Agent 3 was still reconnecting
		// after an earlier fault when the leader died.
		fleet: beats{beaten: []bool{true, false, true, false}}}
	live := []bool{true, true, true, false}
	f := &faults{r: r, until: map[int]time.Time{},
		ended: map[int]time.Time{1: killed.Add(time.Second), 2: killed.Add(-time.Second)}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.timeReconnect(ctx, killed, live)
	if len(r.reconnects.seconds) != 1 {
		t.Fatalf("no reconnect time recorded: the run waited for agent 1, faulted since the kill, or agent 3, not connected at the kill")
	}
	r.fleet = beats{beaten: []bool{true, true, false, false}}
	r.reconnects.seconds = nil
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	f.timeReconnect(ctx2, killed, live)
	if len(r.reconnects.seconds) != 0 {
		t.Fatalf("a reconnect time was recorded while agent 2 (its fault ended before the kill) had not reached the new leader")
	}
}
