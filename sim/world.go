package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/agent"
	"shoal/api"
	"shoal/api/client"
	"shoal/engine/duty"
	"shoal/engine/monitor"
	"shoal/loadgen/check"
	"shoal/manager/control"
	"shoal/route"
	"shoal/statemachine"
)

// Config is a simulated cluster.
type Config struct {
	// Seed decides everything the simulation chooses: replicas' lags, the
	// replica that serves each call, delays, drops, the executor's stage
	// times, the scheduler's ties.
	Seed     uint64
	Replicas int // manager replicas (default 3)
	Groups   int // service groups (default 2)
	// MaxLag is the longest a follower replica takes to apply an entry
	// after its commit (default 500ms; each replica's lag per group is
	// drawn up to it; negative: none).
	MaxLag       time.Duration
	SyncInterval time.Duration // the agents' sync interval (default 10s)
	// Plant names seeded bugs of the state machine (comma-separated;
	// needs -tags shoal_seams).
	Plant string
}

func (c *Config) defaults() {
	if c.Replicas <= 0 {
		c.Replicas = 3
	}
	if c.Groups <= 0 {
		c.Groups = 2
	}
	if c.MaxLag == 0 {
		c.MaxLag = 500 * time.Millisecond
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = 10 * time.Second
	}
}

// monitorConfig is the node monitor's: small times, no jitter.
var monitorConfig = monitor.Config{
	Jitter:        -1,
	MinTTL:        5 * time.Second,
	MaxTTL:        5 * time.Second,
	GraceFactor:   2,
	FailoverGrace: 30 * time.Second,
	OrphanTimeout: 5 * time.Minute,
}

// epoch is where the simulated clock starts.
var epoch = time.Unix(1_700_000_000, 0)

// World is the whole simulated system in one goroutine-free loop.
type World struct {
	cfg     Config
	rng     *rand.Rand
	clk     *Clock
	mem     *duty.Memory
	gs      *groups
	leader  int // the cluster group's leader replica: runs the duties
	stream  int // the replica the event stream is connected to
	conn    int // the event stream's connection number
	mon     *duty.MonitorDuty
	driver  *duty.Driver
	timers  *duty.TimerDuty
	outbox  *duty.OutboxDuty
	manager *manager
	net     *network
	agents  []*simAgent
	roles   []*rolePlayed // role-played agents (role.go)
	chk     *check.Checker
	// want is the user's desired running count per service.
	want      map[string]int
	trace     *strings.Builder // calls served, when tracing
	traceOnly map[string]bool  // the calls traced (none: all)
	nets      bool             // the network was created
	plants    plants           // the seeded bugs planted
}

// New returns a world with its managers running and no agent.
func New(cfg Config) (*World, error) {
	cfg.defaults()
	plants, err := plant(cfg.Plant)
	if err != nil {
		return nil, err
	}
	w := &World{cfg: cfg, clk: NewClock(epoch), want: map[string]int{}}
	w.rng = rand.New(&drawSource{seed: mix64(cfg.Seed ^ 0x5eed), clk: w.clk})
	w.chk = check.New(epoch)
	w.chk.SetProbe(w.probe)
	w.plants = plants
	w.mem = duty.NewMemoryWith(cfg.Groups, w.clk, plants.state)
	w.gs = newGroups(w.mem, cfg.Replicas, plants.state)
	w.net = &network{w: w, cut: map[string]bool{}, Pin: -1}
	w.drawLags()
	w.stream = w.rng.IntN(cfg.Replicas)
	w.manager = newManager(w)
	w.gs.onApply = func(r, g int, index uint64, effs []statemachine.Effect) { w.manager.applied(r, g, index, effs) }
	if err := w.elect(w.rng.IntN(cfg.Replicas)); err != nil {
		return nil, err
	}
	w.every(time.Second, func(ctx context.Context) { _, _ = w.driver.RunOnce(ctx) })
	w.every(time.Second, func(ctx context.Context) { _ = w.mon.Tick(ctx) })
	w.every(time.Second, func(ctx context.Context) { _ = w.timers.RunOnce(ctx) })
	w.every(2*time.Second, func(ctx context.Context) { _ = w.outbox.RunOnce(ctx) })
	w.every(time.Second, func(context.Context) { w.healSilent() })
	// The network every service runs on: a small subnet, so addresses
	// are given again soon after they are freed.
	w.submit(statemachine.Command{Kind: statemachine.CmdCreateNetwork,
		NetworkSpec: &statemachine.Network{ID: 1, Name: "net", Subnet: "10.0.0.0/24"}})
	w.settle()
	return w, nil
}

// simConfig is the agents' executor: tasks prepare and start within tens
// of milliseconds, a few are rejected, some exit by themselves after
// minutes, stops take up to a second.
func (w *World) simConfig() agent.SimConfig {
	return agent.SimConfig{Seed: w.cfg.Seed,
		Prepare: agent.SimStage{Delay: 5 * time.Millisecond, Jitter: 50 * time.Millisecond},
		Start: agent.SimStage{Delay: 5 * time.Millisecond, Jitter: 50 * time.Millisecond,
			Outcomes: []agent.SimOutcome{{Weight: 49}, {Weight: 1, Reject: "sim: the image is missing"}}},
		Run: agent.SimStage{Delay: 3 * time.Minute, Jitter: 30 * time.Minute,
			Outcomes: []agent.SimOutcome{{Weight: 1, ExitCode: 0}, {Weight: 3, ExitCode: 1}}},
		Stop: agent.SimStage{Delay: 10 * time.Millisecond, Jitter: time.Second},
	}
}

// every runs f every d on the clock.
func (w *World) every(d time.Duration, f func(context.Context)) {
	var tick func()
	tick = func() {
		f(context.Background())
		w.clk.AfterFunc(d, tick)
	}
	w.clk.AfterFunc(d, tick)
}

// jitter returns d ± frac·d, drawn from the seed.
func (w *World) jitter(d time.Duration, frac float64) time.Duration {
	if d <= 0 {
		return 0
	}
	span := int64(float64(d) * frac)
	if span <= 0 {
		return d
	}
	return d - time.Duration(span) + time.Duration(w.rng.Int64N(2*span+1))
}

func (w *World) drawLags() {
	for _, gr := range w.gs.g {
		for r := range gr.lag {
			gr.lag[r] = 0
			if w.cfg.MaxLag > 0 {
				gr.lag[r] = time.Duration(w.rng.Int64N(int64(w.cfg.MaxLag) + 1))
			}
		}
	}
}

// catchUpSlowly has replica r, just restarted, apply every entry 5-30s
// after its commit for 30s (it replays what it missed), then lag as
// before.
func (w *World) catchUpSlowly(r int) {
	before := make([]time.Duration, len(w.gs.g))
	for g, gr := range w.gs.g {
		before[g] = gr.lag[r]
		gr.lag[r] = 5*time.Second + time.Duration(w.rng.Int64N(int64(25*time.Second)))
	}
	w.clk.AfterFunc(30*time.Second, func() {
		for g, gr := range w.gs.g {
			gr.lag[r] = before[g]
		}
	})
}

// elect makes replica r the cluster group's leader: it catches up, and
// the duties start there afresh (the node monitor with its failover
// grace, knowing no heartbeat).
func (w *World) elect(r int) error {
	w.leader = r
	for g := range w.gs.g {
		w.gs.catchUp(r, g, w.gs.end(g), r == w.stream)
	}
	w.manager.elected()
	if w.mon != nil {
		w.mon.StepDown()
	}
	mon, err := duty.NewMonitorDuty(w.mem, duty.MonitorConfig{Clock: w.clk, Monitor: monitorConfig})
	if err != nil {
		return err
	}
	if err := mon.BecomeLeader(context.Background()); err != nil {
		return err
	}
	w.mon = mon
	w.driver = duty.NewDriver(w.mem, duty.DriverConfig{Clock: w.clk, Seed: w.cfg.Seed})
	w.timers = duty.NewTimerDuty(w.mem, duty.TimerConfig{Clock: w.clk})
	w.outbox = duty.NewOutboxDuty(w.mem, duty.OutboxConfig{Clock: w.clk})
	return nil
}

// view is the groups as replica r serves a call.
func (w *World) view(r int) view { return view{w: w, r: r} }

// submit commits user commands through the leader replica.
func (w *World) submit(cmds ...statemachine.Command) []string {
	outs := w.view(w.leader).SubmitMany(context.Background(), cmds)
	var msgs []string
	for i, o := range outs {
		switch {
		case o.Failed != nil:
			msgs = append(msgs, fmt.Sprintf("%s: %v", cmds[i].Kind, o.Failed))
		case o.Result.Code != statemachine.CodeOK:
			msgs = append(msgs, fmt.Sprintf("%s: %v", cmds[i].Kind, o.Result.Err()))
		}
	}
	return msgs
}

// settle runs after every event: replicas apply up to their lag, agents
// take their executors' events, parked polls with news are answered, and
// the checker is fed what the event stream's replica applied.
func (w *World) settle() {
	for range 8 {
		w.gs.settle(w.leader, w.stream, w.clk.Now())
		for _, a := range w.agents {
			a.observe()
		}
		w.manager.wake()
		if !w.feed() {
			break
		}
	}
}

// feed renders the stream replica's new changes, as the API's event stream
// does, into the checker, and settles the checker's suspects with reads
// of the leader's state. It reports whether anything was fed.
func (w *World) feed() bool {
	now := w.clk.Now()
	fed := false
	for g := range w.gs.g {
		chs := w.gs.takeChanges(g)
		if len(chs) == 0 {
			continue
		}
		fed = true
		w.gs.read(w.stream, g, func(st *statemachine.State) {
			for _, c := range chs {
				var typ string
				switch c.eff.Kind {
				case statemachine.EffTaskState:
					typ = "state"
				case statemachine.EffAssignments:
					typ = "assignment"
				case statemachine.EffTaskDesired:
					typ = "desired"
				case statemachine.EffSeqAdvanced:
					typ = "released"
				case statemachine.EffTaskDeleted:
					typ = "deleted"
				case statemachine.EffServiceChanged:
					// The checker learns each service's disconnect window.
					if svc := st.Service(c.eff.Service); svc != nil {
						d := api.RenderService(g, st, svc)
						w.chk.Event(client.Event{Group: g, Raft: c.index, Topic: "service", Type: "changed", Key: svc.Spec.Name, Service: &d}, w.conn, now)
					}
					continue
				case statemachine.EffNodeChanged:
					ev := client.Event{Group: g, Raft: c.index, Topic: "node", Type: "changed", Key: strconv.FormatUint(uint64(c.eff.Node), 10)}
					if n := st.Node(c.eff.Node); n != nil {
						d := api.RenderNode(n)
						ev.Node = &d
					} else {
						ev.Type = "deleted"
					}
					w.chk.Event(ev, w.conn, now)
					continue
				default:
					continue
				}
				ev := client.Event{Group: g, Raft: c.index, Topic: "task", Type: typ, Key: strconv.FormatUint(uint64(c.eff.Task), 10)}
				if t := st.Task(c.eff.Task); t != nil && typ != "deleted" {
					d := api.RenderTask(st, t)
					ev.Task = &d
				}
				w.chk.Event(ev, w.conn, now)
			}
		})
	}
	for _, s := range w.chk.Suspects() {
		a, b := w.readTask(s.Tasks[0]), w.readTask(s.Tasks[1])
		w.chk.Confirm(s, a, b, w.readTask(s.Tasks[0]), now)
	}
	return fed
}

// readTask reads a task from the leader's state, rendered.
func (w *World) readTask(id uint64) *client.Task {
	var out *client.Task
	g := route.TaskGroup(statemachine.TaskID(id))
	if g < 1 || g > w.cfg.Groups {
		return nil
	}
	w.gs.catchUp(w.leader, g, w.gs.end(g), w.leader == w.stream)
	w.gs.read(w.leader, g, func(st *statemachine.State) {
		if t := st.Task(statemachine.TaskID(id)); t != nil {
			d := api.RenderTask(st, t)
			out = &d
		}
	})
	return out
}

// run advances the clock by d, running everything that happens meanwhile.
func (w *World) run(d time.Duration) {
	w.clk.RunUntil(w.clk.Now().Add(d), w.settle)
	w.settle()
}

// agent returns the named agent, creating it.
func (w *World) agent(name string) *simAgent {
	for _, a := range w.agents {
		if a.name == name {
			return a
		}
	}
	a := &simAgent{w: w, name: name, holding: map[statemachine.TaskID]bool{}}
	w.agents = append(w.agents, a)
	return a
}

// crashManagers crashes every manager replica: each restarts from a
// snapshot of its state, the leader's duties and the managers' memory
// (parked polls, sessions' records) are lost, a leader is elected, and
// the event stream reconnects (a new connection, its view read again).
func (w *World) crashManagers() error {
	for r := range w.cfg.Replicas {
		if err := w.gs.restore(r); err != nil {
			return err
		}
	}
	w.manager.crash()
	for g := 0; g <= w.cfg.Groups; g++ {
		if err := w.mem.Restore(g); err != nil {
			return err
		}
	}
	w.drawLags()
	w.stream = w.rng.IntN(w.cfg.Replicas)
	if err := w.elect(w.rng.IntN(w.cfg.Replicas)); err != nil {
		return err
	}
	w.reconnectStream()
	return nil
}

// reconnectStream opens a new event-stream connection that could not
// resume: the checker's view is read again from the stream's replica.
func (w *World) reconnectStream() {
	w.conn++
	var tasks []client.Task
	for g := 1; g <= w.cfg.Groups; g++ {
		w.gs.catchUp(w.stream, g, w.gs.end(g), true)
		w.gs.takeChanges(g)
		w.gs.read(w.stream, g, func(st *statemachine.State) {
			for _, sid := range st.ServiceIDs() {
				_, slots := st.SlotTasks(sid)
				for _, ts := range slots {
					for _, t := range ts {
						tasks = append(tasks, api.RenderTask(st, t))
					}
				}
			}
		})
	}
	w.chk.Reset(tasks, w.conn, w.clk.Now())
}

// probe says what the agent of node keeps for a task (the checker's
// second opinion on an address-agents conflict) and how long the agent
// has been silent.
func (w *World) probe(node uint32, task uint64) string {
	for _, a := range w.agents {
		if uint32(a.node) != node {
			continue
		}
		r, ok := a.store.Task(statemachine.TaskID(task))
		if !ok {
			return fmt.Sprintf("agent %s keeps nothing for it (last heard from %s ago)", a.name, w.clk.Now().Sub(a.heard).Round(time.Millisecond))
		}
		return fmt.Sprintf("agent %s keeps it %s/%s removed=%v destroy=%v released=%v (last heard from %s ago)", a.name,
			r.Status.State, r.Assignment.Desired, r.Removed, r.Destroy, r.Released, w.clk.Now().Sub(a.heard).Round(time.Millisecond))
	}
	return fmt.Sprintf("no agent runs node %d now", node)
}

// Violations returns the checker's violations so far.
func (w *World) Violations() int { return w.chk.Count() }

// Checks returns how many checks the checker made.
func (w *World) Checks() int64 {
	var n int64
	for _, r := range w.chk.Results() {
		n += r.Checked
	}
	return n
}

// MaxSilence is the longest an agent stays cut off the managers without
// having been heard from: a partition heals by itself then. The node
// monitor frees a silent node's addresses once it has been down past the
// orphan timeout (5m here), whatever its agent still runs (DESIGN.md,
// "Addresses"); an agent silent longer than that breaks address-agents
// by design, not by a bug. Partitions with short gaps between them count
// as one silence: a gap may be too short for the agent to reconnect.
const MaxSilence = 3 * time.Minute

// partition cuts agent name off until healed (or it has been silent for
// MaxSilence).
func (w *World) partition(name string) { w.net.cut[name] = true }

// healSilent heals the partitions of agents silent for MaxSilence.
func (w *World) healSilent() {
	now := w.clk.Now()
	for _, a := range w.agents {
		if w.net.cut[a.name] && now.Sub(a.heard) >= MaxSilence {
			delete(w.net.cut, a.name)
		}
	}
}

// services returns the user's services, sorted.
func (w *World) services() []string {
	out := make([]string, 0, len(w.want))
	for s := range w.want {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// plants switch on seeded bugs (-tags shoal_seams): in the replicas'
// state machines (state) and in each replica's agent protocol (control);
// nil: none there.
type plants struct {
	state   func(*statemachine.Config)
	control func(*control.AgentsConfig)
}
