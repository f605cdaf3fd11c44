package steps

// The runner's world is shoal/engine/duty's in-memory cluster (the cluster
// group and one service group, entries stamped by a fake clock) with the
// real leader duties over it: the scheduler driver, the node monitor duty
// and the timer duty. The duties submit through a recorder that applies
// each submission as one entry and prints it in the script's dialect.
//
// The node monitor's times are small so a script reads at a glance:
//
//	TTL 5s (no jitter), grace 10s (2 TTLs), failover grace 30s, orphan timeout 5m
//
// Nodes with a disconnect window are found by the duty in the service
// group's state. Every "node", "node-status" and "availability" directive
// re-syncs the monitor with the replicated statuses. The monitor only leads
// (heartbeats are answered, ticks report anything) after a leader-change.
// The directives are listed in runner.go.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"shoal/engine/duty"
	"shoal/engine/monitor"
	"shoal/internal/clock"
	"shoal/route"
	"shoal/sim/dialect"
	sm "shoal/statemachine"
)

// scenarioMonitor is the runner's node monitor configuration; keep it in
// step with the comment above and the scripts' headers.
var scenarioMonitor = monitor.Config{
	Jitter:        -1,
	MinTTL:        5 * time.Second,
	MaxTTL:        5 * time.Second,
	GraceFactor:   2,
	FailoverGrace: 30 * time.Second,
	OrphanTimeout: 5 * time.Minute,
}

// world is the in-memory cluster and the duties over it.
type world struct {
	m      *duty.Memory
	clk    *clock.Fake
	driver *duty.Driver
	mon    *duty.MonitorDuty
	timers *duty.TimerDuty
	log    strings.Builder // what the duties' submissions printed
}

func newWorld(r *runner) world {
	clk := clock.NewFake(time.Unix(0, clockBase))
	w := world{m: duty.NewMemory(1, clk), clk: clk}
	rec := recorder{Memory: w.m, r: r}
	w.driver = duty.NewDriver(rec, duty.DriverConfig{Clock: clk})
	mon, err := duty.NewMonitorDuty(rec, duty.MonitorConfig{Clock: clk, Monitor: scenarioMonitor})
	if err != nil {
		panic(err) // a constant configuration
	}
	w.mon = mon
	w.timers = duty.NewTimerDuty(rec, duty.TimerConfig{Clock: clk})
	return w
}

// recorder is the duties' Cluster: the in-memory cluster, with every
// submission applied through the runner and printed to its log.
type recorder struct {
	*duty.Memory
	r *runner
}

func (c recorder) SubmitMany(ctx context.Context, cmds []sm.Command) []route.Outcome {
	if err := ctx.Err(); err != nil {
		return c.Memory.SubmitMany(ctx, cmds)
	}
	r := c.r
	before := r.describeBefore(cmds)
	res, trailer := r.applyOut(cmds...)
	out := make([]route.Outcome, len(cmds))
	for i := range cmds {
		out[i].Result = res[i]
	}
	r.log.WriteString(r.describe(cmds, before, res))
	r.log.WriteString(trailer)
	return out
}

func (c recorder) SubmitToGroup(ctx context.Context, group int, cmd sm.Command) (sm.Result, error) {
	if group != 1 || (cmd.Kind != sm.CmdTick && cmd.Kind != sm.CmdOrphanNode) {
		return c.Memory.SubmitToGroup(ctx, group, cmd)
	}
	before := c.r.describeBefore([]sm.Command{cmd})
	res, trailer := c.r.applyOut(cmd)
	line := resultLine(res[0])
	if cmd.Kind == sm.CmdOrphanNode {
		line = c.r.describe([]sm.Command{cmd}, before, res)
	}
	c.r.log.WriteString(line + trailer)
	return res[0], res[0].Err()
}

// before is what a submission's lines need from the state before it.
type before struct {
	names  map[sm.TaskID]string
	nodeOf map[sm.TaskID]sm.NodeID
	// orphans: per node orphaned, its tasks the orphaning applies to.
	orphans map[sm.NodeID][]sm.TaskID
	status  map[sm.NodeID]sm.NodeStatus
	since   map[sm.NodeID]int64
}

func (r *runner) describeBefore(cmds []sm.Command) before {
	b := before{names: r.taskNames(), nodeOf: map[sm.TaskID]sm.NodeID{}, status: map[sm.NodeID]sm.NodeStatus{}, since: map[sm.NodeID]int64{}}
	for _, c := range cmds {
		if n := r.s.Node(c.Node); n != nil {
			b.status[c.Node], b.since[c.Node] = n.Status, n.StatusAt
		}
		if c.Kind == sm.CmdOrphanNode {
			if b.orphans == nil {
				b.orphans = map[sm.NodeID][]sm.TaskID{}
			}
			for _, t := range r.s.NodeTasks(c.Node) {
				if sm.CanTransition(sm.CompNodeMonitor, t.Status.State, sm.StateOrphaned) {
					b.orphans[c.Node] = append(b.orphans[c.Node], t.ID)
				}
			}
		}
		if c.Kind == sm.CmdOrphan {
			if t := r.s.Task(c.Task); t != nil {
				b.nodeOf[c.Task] = t.Node
				if n := r.s.Node(t.Node); n != nil {
					b.status[t.Node], b.since[t.Node] = n.Status, n.StatusAt
				}
			}
		}
	}
	return b
}

// describe prints a duty's submission: per assignment "t3 web.1 -> n2: ok",
// per status change "n1 ready->down: ok", per orphaned node
// "n2 orphan (down since 5m30s): t1 (web.1)" and then the results.
func (r *runner) describe(cmds []sm.Command, b before, res []sm.Result) string {
	var out strings.Builder
	for i := 0; i < len(cmds); i++ {
		c := cmds[i]
		switch c.Kind {
		case sm.CmdAssign:
			fmt.Fprintf(&out, "%s %s -> %s: %s", shortID(c.Task), b.names[c.Task], r.nodeName(c.Node), resultLine(res[i]))
		case sm.CmdPendingReason:
			which := "every pending task"
			if len(c.Tasks) > 0 {
				var ids []string
				for _, id := range c.Tasks {
					ids = append(ids, shortID(id))
				}
				which = strings.Join(ids, ",")
			}
			fmt.Fprintf(&out, "pending reason of %s v%d (%s) proposed: %s", c.Name, c.Seq, which, resultLine(res[i]))
		case sm.CmdSetNodeStatus:
			fmt.Fprintf(&out, "%s %s->%s: %s", r.nodeName(c.Node), b.status[c.Node], c.NodeStatus, resultLine(res[i]))
		case sm.CmdOrphanNode:
			which := []string{"no task to orphan"}
			if ids := b.orphans[c.Node]; len(ids) > 0 {
				which = which[:0]
				for _, id := range ids {
					which = append(which, shortID(id)+" ("+b.names[id]+")")
				}
			}
			fmt.Fprintf(&out, "%s orphan (down since %s): %s\n%s", r.nodeName(c.Node), r.elapsed(b.since[c.Node]), strings.Join(which, ", "), resultLine(res[i]))
		case sm.CmdOrphan:
			// One node's orphans are submitted together.
			node := r.taskNode(c.Task, b)
			j := i
			var which []string
			for ; j < len(cmds) && cmds[j].Kind == sm.CmdOrphan && r.taskNode(cmds[j].Task, b) == node; j++ {
				which = append(which, shortID(cmds[j].Task)+" ("+b.names[cmds[j].Task]+")")
			}
			fmt.Fprintf(&out, "%s orphan (down since %s): %s\n", r.nodeName(node), r.elapsed(b.since[node]), strings.Join(which, ", "))
			for k := i; k < j; k++ {
				out.WriteString(resultLine(res[k]))
			}
			i = j - 1
		default:
			fmt.Fprintf(&out, "%s: %s", c.Kind, resultLine(res[i]))
		}
	}
	return out.String()
}

// taskNode is the node an orphaned task was on.
func (r *runner) taskNode(id sm.TaskID, b before) sm.NodeID { return b.nodeOf[id] }

// takeLog returns and clears what the duties printed.
func (r *runner) takeLog() string {
	s := r.log.String()
	r.log.Reset()
	return s
}

// syncMonitor tells the monitor duty the replicated node statuses.
func (r *runner) syncMonitor() {
	if err := r.mon.Sync(context.Background()); err != nil {
		panic(err) // the in-memory cluster cannot fail a read
	}
}

func (r *runner) runDuties(op dialect.Op) (string, bool, error) {
	ctx := context.Background()
	switch op.Cmd {
	case "schedule":
		if _, err := parseArgs(op, 0); err != nil {
			return "", true, err
		}
		out, err := r.cmdSchedule(ctx)
		return out, true, err
	case "advance":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", true, err
		}
		dur, err := time.ParseDuration(a.pos[0])
		if err != nil || dur < 0 {
			return "", true, fmt.Errorf("advance wants a non-negative duration such as 30s, got %q", a.pos[0])
		}
		r.clk.Advance(dur)
		r.now = r.clk.Now().UnixNano()
		if err := r.timers.RunOnce(ctx); err != nil {
			return "", true, err
		}
		return fmt.Sprintf("now=%s\n", r.elapsed(r.now)) + r.takeLog(), true, nil
	case "heartbeat":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", true, err
		}
		b, err := r.mon.Heartbeat(ctx, r.node(a.pos[0]), r.clk.Now())
		if err != nil {
			return r.takeLog() + fmt.Sprintf("error: %v\n", err), true, nil
		}
		return fmt.Sprintf("ttl=%s\n", b.TTL) + r.takeLog(), true, nil
	case "rereported":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", true, err
		}
		return fmt.Sprintf("%t\n", r.mon.MarkReReported(r.node(a.pos[0]))), true, nil
	case "monitor-tick":
		if _, err := parseArgs(op, 0); err != nil {
			return "", true, err
		}
		if err := r.mon.Tick(ctx); err != nil {
			return r.takeLog() + fmt.Sprintf("error: %v\n", err), true, nil
		}
		if out := r.takeLog(); out != "" {
			return out, true, nil
		}
		return "no changes\n", true, nil
	case "leader-change":
		if _, err := parseArgs(op, 0); err != nil {
			return "", true, err
		}
		if err := r.mon.BecomeLeader(ctx); err != nil {
			return "", true, err
		}
		return fmt.Sprintf("leading; nothing expires before %s\n",
			r.elapsed(r.now+int64(scenarioMonitor.FailoverGrace))), true, nil
	}
	return "", false, nil
}

// cmdSchedule runs the scheduler driver once and prints, in task order,
// each pending task's placement or that it stays pending and the reason it
// carries afterwards, then the driver's other proposals (pending reasons
// that changed).
func (r *runner) cmdSchedule(ctx context.Context) (string, error) {
	names := r.taskNames()
	var pending []sm.TaskID
	for _, id := range r.s.TaskIDs() {
		if t := r.s.Task(id); t.Status.State == sm.StatePending && !t.Desired.Stopping() {
			pending = append(pending, id)
		}
	}
	if _, err := r.driver.RunOnce(ctx); err != nil {
		return "", err
	}
	log := r.takeLog()
	if len(pending) == 0 {
		return "nothing pending\n", nil
	}
	// The log holds one line per assignment, then the entry's trailer.
	lines := strings.SplitAfter(log, "\n")
	byTask := map[string]string{}
	var trailer strings.Builder
	for _, l := range lines {
		if id, _, ok := strings.Cut(l, " "); ok && strings.Contains(l, " -> ") {
			byTask[id] = l
		} else {
			trailer.WriteString(l)
		}
	}
	var b strings.Builder
	for _, id := range pending {
		if l, ok := byTask[shortID(id)]; ok {
			b.WriteString(l)
			continue
		}
		msg := "(no reason given)"
		if t := r.s.Task(id); t != nil && t.Message() != "" {
			msg = t.Message()
		}
		fmt.Fprintf(&b, "%s %s: stays pending: %s\n", shortID(id), names[id], msg)
	}
	return b.String() + trailer.String(), nil
}
