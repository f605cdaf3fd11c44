package fleet

import (
	"testing"
	"time"
)

// After a leader kill the loadgen times each agent's first heartbeat since
// the kill. An agent that beat again before the loadgen looked is timed
// by its first beat since, not its last; one whose only beat since came
// before the first look counts by it; one with none since counts as not
// back.
func TestFirstBeatsTimesTheFirstBeatSinceTheMark(t *testing.T) {
	kill := time.Now()
	ns := func(ms int) int64 { return kill.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	f := &Fleet{}
	mk := func() *simAgent {
		a := &simAgent{mgr: &manager{mark: &f.mark}}
		f.agents = append(f.agents, a)
		return a
	}
	early, beaten, quiet := mk(), mk(), mk()
	early.mgr.ok.Store(ns(300)) // beat after the kill, before the first look
	quiet.mgr.ok.Store(ns(-500))
	quiet.mgr.noteFirst(ns(-500))
	got := f.FirstBeats(kill.UnixNano())
	if got[0] != ns(300) || got[1] != 0 || got[2] != 0 {
		t.Fatalf("first look: %v, want [%d 0 0]", got, ns(300))
	}
	for _, ms := range []int{1200, 2700, 4200} {
		beaten.mgr.ok.Store(ns(ms))
		beaten.mgr.noteFirst(ns(ms))
		early.mgr.noteFirst(ns(ms + 100))
	}
	got = f.FirstBeats(kill.UnixNano())
	if got[0] != ns(300) || got[1] != ns(1200) || got[2] != 0 {
		t.Fatalf("after more beats: %v, want [%d %d 0]: each agent's first beat since the kill", got, ns(300), ns(1200))
	}
	// A new mark (the next kill) starts over.
	next := kill.Add(10 * time.Second).UnixNano()
	if got = f.FirstBeats(next); got[0] != 0 || got[1] != 0 {
		t.Fatalf("after a new mark: %v, want none back yet", got)
	}
}
