package monitor

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/mix"
	"shoal/statemachine"
)

// epoch is where script times start, so nothing relies on time zero.
const epoch = int64(1_700_000_000) * int64(time.Second)

// runScript drives a monitor through a script and returns its output. Each
// line is "<offset> <command> [args]", offsets as time.ParseDuration reads
// them:
//
//	track n1 ready [since]  Track (since: offset the status was entered, default now)
//	forget n1               Forget
//	leader                  BecomeLeader
//	beat n1                 Heartbeat; prints the TTL and any change
//	mark n1                 MarkReReported; prints its result
//	tick                    Tick; prints the changes or "-"
//
// Only beat, mark and tick print, one line each: "<offset> <command>: <out>".
func runScript(t *testing.T, m *Monitor, script string) string {
	t.Helper()
	var out strings.Builder
	for ln, line := range strings.Split(strings.TrimSpace(script), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("script line %d %q: %s", ln+1, line, fmt.Sprintf(format, args...))
		}
		off, err := time.ParseDuration(f[0])
		if err != nil || len(f) < 2 {
			fail("want <offset> <command>: %v", err)
		}
		now := epoch + int64(off)
		node := func() statemachine.NodeID {
			if len(f) < 3 || !strings.HasPrefix(f[2], "n") {
				fail("want a node like n1")
			}
			id, err := strconv.ParseUint(f[2][1:], 10, 32)
			if err != nil {
				fail("node: %v", err)
			}
			return statemachine.NodeID(id)
		}
		say := func(format string, args ...any) {
			fmt.Fprintf(&out, "%s %s: %s\n", f[0], f[1], fmt.Sprintf(format, args...))
		}
		switch f[1] {
		case "track":
			n := node()
			if len(f) < 4 {
				fail("want a status")
			}
			st, ok := parseStatus(f[3])
			if !ok {
				fail("unknown status %q", f[3])
			}
			since := now
			if len(f) > 4 {
				d, err := time.ParseDuration(f[4])
				if err != nil {
					fail("since: %v", err)
				}
				since = epoch + int64(d)
			}
			m.Track(n, st, since, now)
		case "forget":
			m.Forget(node())
		case "leader":
			m.BecomeLeader(now)
		case "beat":
			b, err := m.Heartbeat(node(), now)
			switch {
			case err != nil:
				say("error: %v", err)
			case b.Changed:
				say("ttl=%s %s", b.TTL, b.Change)
			default:
				say("ttl=%s", b.TTL)
			}
		case "mark":
			say("%t", m.MarkReReported(node()))
		case "orphan-failed":
			m.OrphanFailed(node())
		case "tick":
			cs := m.Tick(now)
			if len(cs) == 0 {
				say("-")
				continue
			}
			parts := make([]string, len(cs))
			for i, c := range cs {
				parts[i] = c.String()
			}
			say("%s", strings.Join(parts, ", "))
		default:
			fail("unknown command %q", f[1])
		}
	}
	return out.String()
}

func parseStatus(s string) (statemachine.NodeStatus, bool) {
	for st := statemachine.NodeReady; st <= statemachine.NodeDown; st++ {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}

// scriptConfig has no jitter, so TTLs print exactly: 5s TTL, 15s grace.
func scriptConfig() Config {
	return Config{
		Jitter: -1,
		// n1, n11 and n21 hold tasks with a disconnect window; n21's
		// windows are over by the time it is disconnected.
		Disconnectable: func(n statemachine.NodeID) bool { return n == 1 || n == 11 || n == 21 },
		WindowOpen:     func(n statemachine.NodeID) bool { return n == 1 || n == 11 },
	}
}

func TestScripts(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{{
		name: "a failover marks nobody down within the failover grace",
		script: `
0s   track n2 ready
0s   track n3 ready
0s   track n4 ready
0s   tick
0s   leader
10s  beat n2
20s  beat n2
29s  tick
30s  tick
34s  tick
35s  tick`,
		want: `
0s tick: -
10s beat: ttl=5s
20s beat: ttl=5s
29s tick: -
30s tick: n3 ready->down, n4 ready->down
34s tick: -
35s tick: n2 ready->down
`,
	}, {
		name: "a node with disconnect-window tasks disconnects, reconnects, re-reports, is ready",
		script: `
0s   track n1 ready
0s   leader
30s  tick
31s  tick
40s  beat n1
41s  beat n1
41s  mark n1
42s  beat n1
43s  beat n1`,
		want: `
30s tick: n1 ready->disconnected
31s tick: -
40s beat: ttl=5s n1 disconnected->initializing
41s beat: ttl=5s
41s mark: true
42s beat: ttl=5s n1 initializing->ready
43s beat: ttl=5s
`,
	}, {
		name: "a disconnected node stays while a window is open; lost_after is the caller's",
		script: `
0s   track n1 ready
0s   leader
30s  tick
48h  tick`,
		want: `
30s tick: n1 ready->disconnected
48h tick: -
`,
	}, {
		name: "a disconnected node without a live window left goes down",
		script: `
0s   track n21 ready
0s   track n1 disconnected
0s   leader
29s  tick
30s  tick
31s  tick`,
		want: `
29s tick: -
30s tick: n21 ready->disconnected
31s tick: n21 disconnected->down
`,
	}, {
		name: "an initializing node that misses a heartbeat goes down, even with a window",
		script: `
0s   track n1 disconnected
0s   track n2 down
0s   leader
31s  beat n1
31s  beat n2
45s  tick
46s  tick`,
		want: `
31s beat: ttl=5s n1 disconnected->initializing
31s beat: ttl=5s n2 down->initializing
45s tick: -
46s tick: n1 initializing->down, n2 initializing->down
`,
	}, {
		name: "an initializing node that never re-reports is ready after its re-report window (two TTLs)",
		script: `
0s   track n1 disconnected
0s   leader
31s  beat n1
36s  beat n1
40s  beat n1
41s  beat n1`,
		want: `
31s beat: ttl=5s n1 disconnected->initializing
36s beat: ttl=5s
40s beat: ttl=5s
41s beat: ttl=5s n1 initializing->ready
`,
	}, {
		name: "a re-report mark counts only while initializing",
		script: `
0s   track n2 ready
0s   leader
1s   mark n2
30s  tick
31s  mark n2
32s  beat n2
33s  mark n2
33s  mark n9
34s  beat n2`,
		want: `
1s mark: false
30s tick: n2 ready->down
31s mark: false
32s beat: ttl=5s n2 down->initializing
33s mark: true
33s mark: false
34s beat: ttl=5s n2 initializing->ready
`,
	}, {
		name: "a node down past the orphan timeout is reported once per down period",
		script: `
0s          track n2 ready
0s          track n3 ready
0s          leader
30s         tick
1h          beat n3
24h0m29s    tick
24h0m30s    tick
24h0m31s    tick`,
		want: `
30s tick: n2 ready->down, n3 ready->down
1h beat: ttl=5s n3 down->initializing
24h0m29s tick: n3 initializing->down
24h0m30s tick: n2 orphan
24h0m31s tick: -
`,
	}, {
		name: "a new term reports an orphan again, after the failover grace",
		script: `
0s        track n2 down -30h
0s        leader
29s       tick
30s       tick
31s       tick
1m        leader
1m29s     tick
1m30s     tick`,
		want: `
29s tick: -
30s tick: n2 orphan
31s tick: -
1m29s tick: -
1m30s tick: n2 orphan
`,
	}, {
		name: "an orphaning that did not apply everywhere is reported again while the node is down",
		script: `
0s        track n2 down -30h
0s        track n3 down -30h
0s        leader
30s       tick
31s       orphan-failed n2
31s       tick
32s       tick
40s       beat n3
41s       orphan-failed n3
41s       tick`,
		want: `
30s tick: n2 orphan, n3 orphan
31s tick: n2 orphan
32s tick: -
40s beat: ttl=5s n3 down->initializing
41s tick: -
`,
	}, {
		name: "a failed proposal is corrected with Track and decided again",
		script: `
0s   track n2 ready
0s   leader
30s  tick
31s  track n2 ready
31s  tick`,
		want: `
30s tick: n2 ready->down
31s tick: n2 ready->down
`,
	}, {
		name: "unknown and forgotten nodes cannot heartbeat; nothing happens while not leading",
		script: `
0s   track n2 ready
1s   beat n7
1h   tick
1h   forget n2
1h   beat n2`,
		want: `
1s beat: error: monitor: unknown node
1h tick: -
1h beat: error: monitor: unknown node
`,
	}, {
		name: "a node created after the failover gets a full grace from its creation",
		script: `
0s   leader
40s  track n2 ready
54s  tick
55s  tick`,
		want: `
54s tick: -
55s tick: n2 ready->down
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(scriptConfig())
			if err != nil {
				t.Fatal(err)
			}
			got := runScript(t, m, tc.script)
			if want := strings.TrimLeft(tc.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

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
