package monitor

import (
	"fmt"
	"testing"
	"time"

	"shoal/internal/mix"
	"shoal/statemachine"
)

// Every status change the monitor emits is one the state machine accepts,
// in every order of events (checked against the real Apply).
func TestChangesAreLegal(t *testing.T) {
	m, err := New(Config{Disconnectable: func(n statemachine.NodeID) bool { return n%2 == 0 },
		WindowOpen: func(n statemachine.NodeID) bool { return n%4 == 0 }})
	if err != nil {
		t.Fatal(err)
	}
	st := statemachine.New(statemachine.Config{Group: 0})
	var out statemachine.Output
	index := uint64(0)
	steps := map[[2]statemachine.NodeStatus]int{} // from, to → count
	apply := func(now int64, cmds ...statemachine.Command) {
		t.Helper()
		index++
		for _, c := range cmds {
			if n := st.Node(c.Node); c.Kind == statemachine.CmdSetNodeStatus && n != nil {
				steps[[2]statemachine.NodeStatus{n.Status, c.NodeStatus}]++
			}
		}
		st.Apply(cmds, index, now, &out)
		for i, r := range out.Results {
			if err := r.Err(); err != nil {
				t.Fatalf("%s node %d → %s rejected: %v", cmds[i].Kind, cmds[i].Node, cmds[i].NodeStatus, err)
			}
		}
	}
	const nodes = 20
	now := epoch
	for i := 1; i <= nodes; i++ {
		id := statemachine.NodeID(i)
		apply(now, statemachine.Command{Kind: statemachine.CmdUpsertNode,
			NodeSpec: &statemachine.Node{ID: id, Name: fmt.Sprintf("n%d", i)}})
		m.Track(id, statemachine.NodeReady, now, now)
	}
	m.BecomeLeader(now)
	// A seeded walk: each second every node heartbeats, stays silent or
	// re-reports, by a hash of (node, second), and now and then falls silent
	// for 20s, so it expires in whatever status it is and comes back.
	var silentUntil [nodes + 1]int
	for sec := range 1200 {
		now = epoch + int64(sec)*int64(time.Second)
		for i := 1; i <= nodes; i++ {
			id := statemachine.NodeID(i)
			h := mix.Mix64(uint64(i)<<32 | uint64(sec))
			if sec < silentUntil[i] {
				continue
			}
			if h%41 == 0 {
				silentUntil[i] = sec + 20 // long enough to expire
				continue
			}
			switch h % 7 {
			case 0, 1, 2:
				b, err := m.Heartbeat(id, now)
				if err != nil {
					t.Fatal(err)
				}
				if b.Changed {
					apply(now, b.Change.Command())
				}
			case 3:
				m.MarkReReported(id)
			}
		}
		if cs := m.Tick(now); len(cs) > 0 {
			apply(now, Commands(nil, cs)...)
		}
		for i := 1; i <= nodes; i++ {
			id := statemachine.NodeID(i)
			if got, _ := m.Status(id); got != st.Node(id).Status {
				t.Fatalf("at %ds node %d: monitor sees %s, state holds %s", sec, i, got, st.Node(id).Status)
			}
		}
	}
	// The walk took every step the monitor can take.
	R, D, I, X := statemachine.NodeReady, statemachine.NodeDisconnected, statemachine.NodeInitializing, statemachine.NodeDown
	for _, step := range [][2]statemachine.NodeStatus{{R, D}, {R, X}, {D, I}, {D, X}, {I, R}, {I, X}, {X, I}} {
		if steps[step] == 0 {
			t.Errorf("the walk never took %s -> %s (took %v)", step[0], step[1], steps)
		}
	}
	// An initializing node that misses its heartbeat goes down, never
	// disconnected (its reconnect already failed once).
	if n := steps[[2]statemachine.NodeStatus{I, D}]; n != 0 {
		t.Errorf("the walk took %s -> %s %d times", I, D, n)
	}
}
