package scenario

// The runner plays the node monitor with a pure engine/monitor.Monitor over
// the runner's state and fake clock (the engine's MonitorDuty does the same
// over Raft). Its times are small so a script reads at a glance:
//
//	TTL 5s (no jitter), grace 10s (2 TTLs), failover grace 30s, orphan timeout 5m
//
// and Disconnectable is the state's HasDisconnectWindow. Every node the
// "node" and "node-status" directives touch is tracked with its replicated
// status. The monitor only leads (ticks report anything) after a
// leader-change. Commands:
//
//	heartbeat n1     Heartbeat at now; prints the TTL and applies (and prints)
//	                 any status change it causes as an entry
//	rereported n1    MarkReReported (the agent re-reported its tasks); prints
//	                 whether it counted (only while initializing)
//	monitor-tick     Tick at now; applies each status change as an entry and,
//	                 for a node down past the orphan timeout, orphans its
//	                 assigned..running tasks (one entry)
//	leader-change    BecomeLeader at now (a new leader's failover grace)

import (
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"shoal/engine/monitor"
	sm "shoal/statemachine"
)

// scenarioMonitor is the runner's node monitor configuration; keep it in
// step with the comment above and the scripts' headers.
func scenarioMonitor(s *sm.State) monitor.Config {
	return monitor.Config{
		Jitter:         -1,
		MinTTL:         5 * time.Second,
		MaxTTL:         5 * time.Second,
		GraceFactor:    2,
		FailoverGrace:  30 * time.Second,
		OrphanTimeout:  5 * time.Minute,
		Disconnectable: s.HasDisconnectWindow,
	}
}

func newMonitor(s *sm.State) *monitor.Monitor {
	m, err := monitor.New(scenarioMonitor(s))
	if err != nil {
		panic(err) // a constant configuration
	}
	return m
}

// track tells the monitor a node's replicated status (a no-op when the
// monitor already agrees).
func (r *runner) track(id sm.NodeID) {
	if n := r.s.Node(id); n != nil {
		r.mon.Track(id, n.Status, n.StatusAt, r.now)
	} else {
		r.mon.Forget(id)
	}
}

func (r *runner) runMonitor(d *datadriven.TestData) (string, bool, error) {
	switch d.Cmd {
	case "heartbeat":
		a, err := parseArgs(d, 1)
		if err != nil {
			return "", true, err
		}
		id := r.node(a.pos[0])
		b, err := r.mon.Heartbeat(id, r.now)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err), true, nil
		}
		out := fmt.Sprintf("ttl=%s\n", b.TTL)
		if b.Changed {
			out += r.applyChange(b.Change)
		}
		return out, true, nil
	case "rereported":
		a, err := parseArgs(d, 1)
		if err != nil {
			return "", true, err
		}
		return fmt.Sprintf("%t\n", r.mon.MarkReReported(r.node(a.pos[0]))), true, nil
	case "monitor-tick":
		if _, err := parseArgs(d, 0); err != nil {
			return "", true, err
		}
		changes := append([]monitor.Change(nil), r.mon.Tick(r.now)...)
		if len(changes) == 0 {
			return "no changes\n", true, nil
		}
		var b strings.Builder
		for _, c := range changes {
			b.WriteString(r.applyChange(c))
		}
		return b.String(), true, nil
	case "leader-change":
		if _, err := parseArgs(d, 0); err != nil {
			return "", true, err
		}
		r.mon.BecomeLeader(r.now)
		return fmt.Sprintf("leading; nothing expires before %s\n",
			r.elapsed(r.now+int64(r.mon.Config().FailoverGrace))), true, nil
	}
	return "", false, nil
}

// applyChange prints a monitor change and applies what it asks for: the
// status change, or orphaning the node's assigned..running tasks.
func (r *runner) applyChange(c monitor.Change) string {
	name := r.nodeName(c.Node)
	if c.Kind == monitor.ChangeStatus {
		out := fmt.Sprintf("%s %s->%s: %s", name, c.From, c.To, r.apply(c.Command()))
		r.track(c.Node) // a rejected change: decide again from the state
		return out
	}
	names := r.taskNames()
	var cmds []sm.Command
	var which []string
	for _, t := range r.s.NodeTasks(c.Node) {
		if sm.CanTransition(sm.CompNodeMonitor, t.Status.State, sm.StateOrphaned) {
			cmds = append(cmds, sm.Command{Kind: sm.CmdOrphan, Task: t.ID})
			which = append(which, shortID(t.ID)+" ("+names[t.ID]+")")
		}
	}
	out := fmt.Sprintf("%s orphan (down since %s): ", name, r.elapsed(c.At))
	if len(cmds) == 0 {
		return out + "no tasks to orphan\n"
	}
	return out + strings.Join(which, ", ") + "\n" + r.apply(cmds...)
}
