package monitor

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"shoal/sim/dialect"
	"shoal/statemachine"
)

// epoch is where script times start, so nothing relies on time zero.
const epoch = int64(1_700_000_000) * int64(time.Second)

// TestScripts runs testdata/*.txt: datadriven scripts that drive one
// Monitor (scriptConfig) on a clock that only "advance" moves. The
// directives are the ones engine/scenario and sim use for the same steps:
//
//	advance 10s                 move the clock; prints now=<time since the start>
//	node-status n1 ready [since=-30h]  the replicated status is now this (Track; since: when
//	                            the node entered it, as a time since the start; default now)
//	remove-node n1              the node was removed (Forget)
//	leader-change               this replica leads now (BecomeLeader)
//	heartbeat n1                Heartbeat: ttl=<TTL>, then the status change it caused, or the error
//	rereported n1               MarkReReported: whether it counted
//	orphan-failed n1            the orphaning of n1 did not apply everywhere (OrphanFailed)
//	monitor-tick                Tick: one change per line, or "no changes"
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		m, err := New(scriptConfig())
		if err != nil {
			t.Fatal(err)
		}
		now := epoch
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := runDirective(m, &now, d)
			if err != nil {
				t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
			}
			return out
		})
	})
}

func runDirective(m *Monitor, now *int64, d *datadriven.TestData) (string, error) {
	op := dialect.FromData(d)
	if err := dialect.Check(dialect.Monitor, op); err != nil {
		return "", err
	}
	node := func() (statemachine.NodeID, error) {
		id, err := strconv.ParseUint(strings.TrimPrefix(op.Pos[0], "n"), 10, 32)
		if err != nil || !strings.HasPrefix(op.Pos[0], "n") {
			return 0, fmt.Errorf("want a node like n1, got %q", op.Pos[0])
		}
		return statemachine.NodeID(id), nil
	}
	switch d.Cmd {
	case "advance":
		dur, err := op.DurationArg()
		if err != nil {
			return "", err
		}
		*now += int64(dur)
		return fmt.Sprintf("now=%s\n", time.Duration(*now-epoch)), nil
	case "leader-change":
		if err := op.Want(0); err != nil {
			return "", err
		}
		m.BecomeLeader(*now)
		return "", nil
	case "monitor-tick":
		if err := op.Want(0); err != nil {
			return "", err
		}
		cs := m.Tick(*now)
		if len(cs) == 0 {
			return "no changes\n", nil
		}
		var b strings.Builder
		for _, c := range cs {
			b.WriteString(c.String() + "\n")
		}
		return b.String(), nil
	}
	switch d.Cmd {
	case "node-status", "remove-node", "heartbeat", "rereported", "orphan-failed":
	default:
		return "", fmt.Errorf("unknown directive %q", d.Cmd)
	}
	if d.Cmd == "node-status" {
		if err := op.Want(2, "since"); err != nil {
			return "", err
		}
	} else if err := op.Want(1); err != nil {
		return "", err
	}
	n, err := node()
	if err != nil {
		return "", err
	}
	switch d.Cmd {
	case "node-status":
		st, ok := parseStatus(op.Pos[1])
		if !ok {
			return "", fmt.Errorf("unknown status %q", op.Pos[1])
		}
		since := *now
		if v, ok := op.Get("since"); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return "", fmt.Errorf("since wants a time since the start such as -30h: %v", err)
			}
			since = epoch + int64(d)
		}
		m.Track(n, st, since, *now)
		return "", nil
	case "remove-node":
		m.Forget(n)
		return "", nil
	case "heartbeat":
		b, err := m.Heartbeat(n, *now)
		switch {
		case err != nil:
			return fmt.Sprintf("error: %v\n", err), nil
		case b.Changed:
			return fmt.Sprintf("ttl=%s\n%s\n", b.TTL, b.Change), nil
		}
		return fmt.Sprintf("ttl=%s\n", b.TTL), nil
	case "rereported":
		return fmt.Sprintf("%t\n", m.MarkReReported(n)), nil
	case "orphan-failed":
		m.OrphanFailed(n)
		return "", nil
	}
	return "", fmt.Errorf("unknown directive %q", d.Cmd)
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

// TestSpeaksItsVocabulary runs every directive the dialect lists for the
// monitor's scripts without arguments: none may be one it does not know.
func TestSpeaksItsVocabulary(t *testing.T) {
	for _, name := range dialect.Speaks(dialect.Monitor) {
		m, err := New(scriptConfig())
		if err != nil {
			t.Fatal(err)
		}
		now := epoch
		if _, err := runDirective(m, &now, &datadriven.TestData{Cmd: name}); err != nil && strings.Contains(err.Error(), "unknown directive") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
