package fleet

import (
	"testing"
	"time"
)

// BeatAge is the oldest last-successful heartbeat among the agents whose
// last heartbeat succeeded: agents cut off or never heard are left out.
func TestBeatAgeIsTheOldestAmongLiveAgents(t *testing.T) {
	now := time.Now()
	agent := func(ago time.Duration, live bool) *simAgent {
		a := &simAgent{mgr: &manager{}}
		a.mgr.ok.Store(now.Add(-ago).UnixNano())
		a.live.Store(live)
		return a
	}
	f := &Fleet{agents: []*simAgent{agent(3*time.Second, true), agent(20*time.Second, false),
		agent(7*time.Second, true), {mgr: &manager{}}}}
	if got := f.BeatAge(); got < 7*time.Second || got > 9*time.Second {
		t.Fatalf("beat age %s, want 7s (the cut-off agent's 20s and the never-heard one left out)", got)
	}
}
