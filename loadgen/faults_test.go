package loadgen

import (
	"context"
	"io"
	"testing"
	"time"

	"shoal/loadgen/report"
)

// beats is an agents fleet that only answers FirstBeats.
type beats struct {
	agents
	at []int64
}

func (b beats) FirstBeats(int64) []int64 { return b.at }

// The time for every agent to reach the new leader leaves out agents the
// loadgen itself faulted at or after the kill and agents that were not
// connected when it happened (their fault, not the failover, decides when
// they come back), and counts agents whose fault ended before it. It is
// the agents' own time of their first heartbeat since the kill, not when
// the loadgen saw it.
func TestReconnectTimeLeavesOutAgentsFaultedSinceTheKill(t *testing.T) {
	killed := time.Now()
	r := &run{cfg: Config{Agents: 4, Out: io.Discard}, start: killed,
		// Agent 0 never faulted, agent 2's fault ended before the kill:
		// both reached the new leader. Agent 1 vanished before the kill and
		// came back after it (its fault is over, so not in until): it has
		// not reached the new leader yet. Agent 3 was still reconnecting
		// after an earlier fault when the leader died.
		fleet: beats{at: []int64{at(killed, 1500), at(killed, -10), at(killed, 2500), 0}}}
	live := []bool{true, true, true, false}
	f := &faults{r: r, until: map[int]time.Time{},
		ended: map[int]time.Time{1: killed.Add(time.Second), 2: killed.Add(-time.Second)}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.timeReconnect(ctx, killed, live, 0)
	if len(r.reconnectSeconds()) != 1 {
		t.Fatalf("no reconnect time recorded: the run waited for agent 1, faulted since the kill, or agent 3, not connected at the kill")
	}
	if got := r.reconnectSeconds()[0]; got != 2.5 {
		t.Fatalf("recorded %vs, want 2.5s: the last agent's first heartbeat since the kill", got)
	}
	if got, want := r.reconnects.detail[0], (report.KillRecovery{Agents: 2, HalfSeconds: 1.5, P90Seconds: 2.5, AllSeconds: 2.5}); got != want {
		t.Fatalf("recorded %+v, want %+v: of the two agents timed, one was back 1.5s after the kill, the other 2.5s", got, want)
	}
	r.fleet = beats{at: []int64{at(killed, 100), at(killed, 200), at(killed, -1), 0}}
	r.reconnects.detail = nil
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	f.timeReconnect(ctx2, killed, live, 0)
	if len(r.reconnectSeconds()) != 0 {
		t.Fatalf("a reconnect time was recorded while agent 2 (its fault ended before the kill) had not reached the new leader")
	}
}

// at is t plus ms milliseconds, in Unix nanoseconds.
func at(t time.Time, ms int64) int64 { return t.Add(time.Duration(ms) * time.Millisecond).UnixNano() }

// A leader kill is made only with killMargin left before its phase ends;
// without a deadline, always.
func TestKillWorthItLeavesTheMargin(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		left time.Duration
		want bool
	}{{10 * time.Second, true}, {killMargin, true}, {killMargin - time.Millisecond, false}, {0, false}, {-time.Second, false}} {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(c.left))
		if got := killWorthIt(ctx, now); got != c.want {
			t.Errorf("%v before the phase ends: kill %t, want %t", c.left, got, c.want)
		}
		cancel()
	}
	if !killWorthIt(context.Background(), now) {
		t.Error("no deadline: no kill")
	}
}
