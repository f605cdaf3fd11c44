package sim

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"shoal/manager/control"
	"shoal/sim/dialect"
	"shoal/statemachine"
)

// Op is one directive of the simulation's dialect (package dialect).
type Op = dialect.Op

// ParseOp parses a script line.
func ParseOp(line string) (Op, error) { return dialect.Parse(line) }

// ConfigOf reads a "sim" directive.
func ConfigOf(op Op) (Config, error) {
	if op.Cmd != "sim" {
		return Config{}, fmt.Errorf("a script starts with sim seed=N (replicas=, groups=, lag=, sync=, plant=), not %q", op.Cmd)
	}
	if err := op.Only(0, "seed", "replicas", "groups", "lag", "sync", "plant"); err != nil {
		return Config{}, err
	}
	var cfg Config
	seed, err := op.Int("seed", 1)
	if err != nil {
		return cfg, err
	}
	cfg.Seed = uint64(seed)
	if cfg.Replicas, err = op.Int("replicas", 3); err != nil {
		return cfg, err
	}
	if cfg.Groups, err = op.Int("groups", 2); err != nil {
		return cfg, err
	}
	if cfg.MaxLag, err = op.Dur("lag", 500*time.Millisecond); err != nil {
		return cfg, err
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = -1 // no lag
	}
	if cfg.SyncInterval, err = op.Dur("sync", 10*time.Second); err != nil {
		return cfg, err
	}
	cfg.Plant, _ = op.Get("plant")
	return cfg, nil
}

// Do runs one directive and returns what it prints. The directives (the
// words of package dialect that sim speaks):
//
//	agent-up n1                 start agent n1 (a new node; again: nothing)
//	restart-agent n1 [wipe]     restart n1 from its store (wipe: its machine lost disk and processes; it joins as a new node)
//	sync n1 [seqs=0,3,2]        n1 syncs now (seqs: with these sequences, a report collected earlier)
//	partition n1 / heal [n1]    cut n1 off the managers both ways (healed by itself once n1 was silent for MaxSilence) / reconnect n1 (no argument: everyone)
//	deliver drop=P delay=D dup=P  the network from now on: drop and duplicate with these odds, delay up to D
//	crash-manager               every manager replica restarts from a snapshot; a leader is elected
//	restart-manager m2          replica m2 restarts from a snapshot of its state and catches up slowly (5-30s behind for 30s)
//	leader-change m2            replica m2 becomes the cluster group's leader (the duties restart there)
//	lag m2 2s                   replica m2 applies every entry 2s after its commit (0s: at once)
//	route m2 / route any        every call goes to m2 / to a replica the seed chooses
//	create-service web [replicas=N] [lost-after=1m] [reconcile=…] …  create a replicated service on the network (lost-after: its
//	                            disconnect window; every option of dialect.ServiceSpec but mode)
//	update-service web [replicas=N] [image=v2] … / remove-service web / rollback-service web
//	availability n1 active|pause|drain  the user sets a node's availability
//	advance 5s                  advance the clock, running everything due
//	stabilize [max=10m]         heal everything, then run until the cluster settles; then the quiescence checks
//	trace on [only=sync,status] | trace off   print the calls the managers serve (only: these calls)
//	dump                        services, tasks, agents, replicas
//	violations                  the checker's violations so far
//	_breakpoint                 nothing (a place for a debugger's breakpoint)
//
// Role-played agents (role.go): a node whose agent the script plays, each
// directive one message sent on the network and its answer printed:
//
//	node n1 role-played [cpu=N] [mem=64M] [labels=k=v,…]  a new node; its first session
//	session n1                  open a new session (a reconnect)
//	heartbeat n1                a heartbeat
//	report n1 web.1 running [exit=N] [message=…]  one status report (web.1#2: the slot's 2nd oldest task; t1.5: an ID)
//	rereported n1 [holds=web.1,…]  the re-report marker, listing what n1 holds
//	assignments n1 [cursor=0,4|none]  one poll of the assignment stream, without waiting (default: from the cursor the last frame gave)
//	sync n1 [seqs=0,current-1] [holds=web.1,…]  a sync (seqs: per group, the cluster group first; current: the
//	                            node's sequence in the leader's state; default: what the last frame brought)
//	partition n1, heal [n1]     as for a real agent (but a role-played agent's partition never heals by itself)
func (w *World) Do(op Op) (string, error) {
	var out strings.Builder
	m := func(name string) (int, error) {
		if len(op.Pos) < 1 {
			return 0, fmt.Errorf("%s needs a manager replica (m1..m%d)", op.Cmd, w.cfg.Replicas)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(op.Pos[0], "m"))
		if err != nil || n < 1 || n > w.cfg.Replicas {
			return 0, fmt.Errorf("no manager replica %q (there are m1..m%d)", op.Pos[0], w.cfg.Replicas)
		}
		return n - 1, nil
	}
	needAgent := func() (*simAgent, error) {
		if len(op.Pos) < 1 {
			return nil, fmt.Errorf("%s needs an agent name", op.Cmd)
		}
		return w.agent(op.Pos[0]), nil
	}
	if err := dialect.Check(dialect.Sim, op); err != nil {
		return "", err
	}
	cmd := op.Cmd
	if s, ok, err := w.roleDo(op); ok {
		if err != nil {
			return "", err
		}
		out.WriteString(s)
		cmd = "_breakpoint" // done; only the trace is left to print
	}
	if len(op.Pos) > 0 && w.role(op.Pos[0]) != nil {
		switch cmd {
		case "agent-up", "restart-agent", "sync":
			return "", fmt.Errorf("%s is role-played: its messages are directives (session, heartbeat, report, rereported, assignments, sync)", op.Pos[0])
		case "partition":
			if err := op.Only(1); err != nil {
				return "", err
			}
			w.partition(op.Pos[0])
			cmd = "_breakpoint"
		}
	}
	switch cmd {
	case "_breakpoint":
	case "session", "heartbeat", "report", "rereported", "assignments":
		return "", fmt.Errorf("%s is a role-played node's directive (node n1 role-played makes one)", op.Cmd)
	case "agent-up":
		if err := op.Only(1); err != nil {
			return "", err
		}
		a, err := needAgent()
		if err != nil {
			return "", err
		}
		if !a.up {
			a.start(false)
		}
	case "restart-agent":
		if err := op.Only(2); err != nil {
			return "", err
		}
		a, err := needAgent()
		if err != nil {
			return "", err
		}
		a.start(len(op.Pos) > 1 && op.Pos[1] == "wipe")
	case "sync":
		if err := op.Only(1, "seqs"); err != nil {
			return "", err
		}
		a, err := needAgent()
		if err != nil {
			return "", err
		}
		var seqs []uint64
		if v, ok := op.Get("seqs"); ok {
			ss, err := dialect.ParseSeqs(v)
			if err != nil {
				return "", fmt.Errorf("seqs (one per group, the cluster group first): %w", err)
			}
			seqs = make([]uint64, len(ss))
			for g, sq := range ss {
				if sq.Current {
					return "", fmt.Errorf("seqs: a real agent's sync takes numbers (a role-played one's takes current)")
				}
				seqs[g] = sq.N
			}
		}
		if err := a.syncNow(seqs); err != nil {
			return "", err
		}
	case "partition":
		if err := op.Only(1); err != nil {
			return "", err
		}
		a, err := needAgent()
		if err != nil {
			return "", err
		}
		w.partition(a.name)
	case "heal":
		if err := op.Only(1); err != nil {
			return "", err
		}
		if len(op.Pos) == 0 {
			clear(w.net.cut)
		} else {
			delete(w.net.cut, op.Pos[0])
		}
	case "deliver":
		if err := op.Only(0, "drop", "delay", "dup"); err != nil {
			return "", err
		}
		var err error
		if w.net.Drop, err = op.Float("drop", 0); err != nil {
			return "", err
		}
		if w.net.Dup, err = op.Float("dup", 0); err != nil {
			return "", err
		}
		if w.net.Delay, err = op.Dur("delay", 0); err != nil {
			return "", err
		}
	case "crash-manager":
		if err := op.Only(0); err != nil {
			return "", err
		}
		if w.plants.state != nil {
			return "", fmt.Errorf("crash-manager restores replicas from snapshots, which keep no seeded bug")
		}
		if err := w.crashManagers(); err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "leader m%d, event stream on m%d (connection %d)\n", w.leader+1, w.stream+1, w.conn)
	case "restart-manager":
		r, err := m("")
		if err != nil {
			return "", err
		}
		if w.plants.state != nil {
			return "", fmt.Errorf("restart-manager restores a replica from a snapshot, which keeps no seeded bug")
		}
		if err := w.gs.restore(r); err != nil {
			return "", err
		}
		w.manager.restart(r)
		w.catchUpSlowly(r)
		if r == w.stream {
			w.reconnectStream()
		}
	case "leader-change":
		r, err := m("")
		if err != nil {
			return "", err
		}
		if err := w.elect(r); err != nil {
			return "", err
		}
	case "lag":
		r, err := m("")
		if err != nil {
			return "", err
		}
		if len(op.Pos) != 2 {
			return "", fmt.Errorf("lag wants a replica and a duration: lag m2 2s")
		}
		n, err := time.ParseDuration(op.Pos[1])
		if err != nil || n < 0 {
			return "", fmt.Errorf("lag wants a duration, got %q", op.Pos[1])
		}
		for _, gr := range w.gs.g {
			gr.lag[r] = n
		}
	case "route":
		if len(op.Pos) == 1 && op.Pos[0] == "any" {
			w.net.Pin = -1
			break
		}
		r, err := m("")
		if err != nil {
			return "", err
		}
		w.net.Pin = r
	case "create-service", "update-service", "remove-service", "rollback-service":
		return w.user(op)
	case "availability":
		if err := op.Want(2); err != nil {
			return "", err
		}
		node := statemachine.NodeID(0)
		if ra := w.role(op.Pos[0]); ra != nil {
			node = ra.node
		}
		for _, a := range w.agents {
			if a.name == op.Pos[0] {
				node = a.node
			}
		}
		if node == 0 {
			return "", fmt.Errorf("no node %s has joined", op.Pos[0])
		}
		av, err := dialect.Enum[statemachine.Availability]("availability", op.Pos[1], "active", "pause", "drain")
		if err != nil {
			return "", err
		}
		if msgs := w.submit(statemachine.Command{Kind: statemachine.CmdSetAvailability, Node: node, Availability: av}); len(msgs) > 0 {
			return strings.Join(msgs, "\n") + "\n", nil
		}
		w.settle()
	case "advance":
		d, err := op.DurationArg()
		if err != nil {
			return "", err
		}
		w.run(d)
	case "stabilize":
		if err := op.Only(0, "max"); err != nil {
			return "", err
		}
		max, err := op.Dur("max", 10*time.Minute)
		if err != nil {
			return "", err
		}
		start := w.clk.Now()
		if w.stabilize(max) {
			fmt.Fprintf(&out, "settled after %s\n", w.clk.Now().Sub(start))
		} else {
			fmt.Fprintf(&out, "not settled after %s\n", max)
		}
	case "trace":
		if err := op.Only(1, "only"); err != nil {
			return "", err
		}
		w.trace, w.traceOnly = nil, nil
		if len(op.Pos) == 1 && op.Pos[0] == "on" {
			w.trace = &strings.Builder{}
			if v, ok := op.Get("only"); ok {
				w.traceOnly = map[string]bool{}
				for _, c := range strings.Split(v, ",") {
					w.traceOnly[c] = true
				}
			}
		}
	case "dump":
		w.dump(&out)
	case "violations":
		w.violations(&out)
	default:
		return "", fmt.Errorf("unknown directive %q", op.Cmd)
	}
	if w.trace != nil {
		out.WriteString(w.trace.String())
		w.trace.Reset()
	}
	return out.String(), nil
}

// user runs a user's directive: create-service, update-service,
// remove-service.
func (w *World) user(op Op) (string, error) {
	if len(op.Pos) < 1 {
		return "", fmt.Errorf("%s needs a service name", op.Cmd)
	}
	name := op.Pos[0]
	var cmd statemachine.Command
	switch op.Cmd {
	case "create-service", "update-service":
		// Every service option of the dialect but mode: quiescence counts
		// a service's replicas.
		keys := slices.DeleteFunc(slices.Clone(dialect.ServiceKeys), func(k string) bool { return k == "mode" })
		if err := op.Only(1, keys...); err != nil {
			return "", err
		}
		spec := &statemachine.ServiceSpec{Name: name, Replicas: 1, Networks: []string{"net"}, Image: "v1", Command: []string{"serve"}}
		kind := statemachine.CmdCreateService
		if op.Cmd == "update-service" {
			if spec = w.spec(name); spec == nil {
				return "", fmt.Errorf("no service %q", name)
			}
			if len(op.KV) == 0 {
				return "", fmt.Errorf("update-service wants an option: replicas=N, image=v2, …")
			}
			kind = statemachine.CmdUpdateService
		}
		if err := dialect.ServiceSpec(op, spec, kind == statemachine.CmdCreateService); err != nil {
			return "", err
		}
		cmd = statemachine.Command{Kind: kind, Spec: spec}
	case "remove-service":
		if err := op.Only(1); err != nil {
			return "", err
		}
		cmd = statemachine.Command{Kind: statemachine.CmdRemoveService, Name: name}
	case "rollback-service":
		if err := op.Only(1); err != nil {
			return "", err
		}
		cmd = statemachine.Command{Kind: statemachine.CmdRollbackService, Name: name}
	}
	msgs := w.submit(cmd)
	if len(msgs) > 0 {
		return strings.Join(msgs, "\n") + "\n", nil
	}
	switch op.Cmd {
	case "remove-service":
		delete(w.want, name)
	case "rollback-service":
		if spec := w.spec(name); spec != nil {
			w.want[name] = int(spec.Replicas)
		}
	default:
		w.want[name] = int(cmd.Spec.Replicas)
	}
	w.settle()
	return "", nil
}

// spec returns a copy of a service's current spec (nil: no such service).
func (w *World) spec(name string) *statemachine.ServiceSpec {
	var out *statemachine.ServiceSpec
	for g := 1; g <= w.cfg.Groups && out == nil; g++ {
		w.gs.read(w.leader, g, func(st *statemachine.State) {
			if svc := st.ServiceByName(name); svc != nil && !svc.Remove {
				sp := svc.Spec
				sp.Networks = slices.Clone(sp.Networks)
				sp.Command = slices.Clone(sp.Command)
				sp.Constraints = slices.Clone(sp.Constraints)
				out = &sp
			}
		})
	}
	return out
}

// dump prints the leader's services and tasks, the agents and the
// replicas' applied indexes.
func (w *World) dump(out *strings.Builder) {
	fmt.Fprintf(out, "time %s, leader m%d, event stream on m%d\n", w.clk.Now().Sub(epoch), w.leader+1, w.stream+1)
	for g := 1; g <= w.cfg.Groups; g++ {
		w.gs.read(w.leader, g, func(st *statemachine.State) {
			for _, sid := range st.ServiceIDs() {
				svc := st.Service(sid)
				extra := ""
				if svc.Remove {
					extra = " removing"
				}
				fmt.Fprintf(out, "service %s (group %d) v%d replicas=%d%s\n", svc.Spec.Name, g, svc.SpecVersion, svc.Spec.Replicas, extra)
				slots, tasks := st.SlotTasks(sid)
				for i, slot := range slots {
					for _, t := range tasks[i] {
						d := renderLine(st, t)
						fmt.Fprintf(out, "  %s.%d %s\n", svc.Spec.Name, slot, d)
					}
				}
			}
		})
	}
	for g := 1; g <= w.cfg.Groups; g++ {
		w.gs.read(w.leader, g, func(st *statemachine.State) {
			if p := st.Pool(1); p != nil {
				fmt.Fprintf(out, "addresses of group %d: %d held, %d quarantined, %d free\n", g, p.Held(), p.Quarantined(), p.Free())
			}
		})
	}
	w.gs.read(w.leader, 0, func(st *statemachine.State) {
		for _, id := range st.NodeIDs() {
			n := st.Node(id)
			fmt.Fprintf(out, "node %d %s %s\n", id, n.Name, n.Status)
		}
	})
	for _, a := range w.agents {
		state := "down"
		switch {
		case a.up && a.live:
			state = "live"
		case a.up:
			state = "connecting"
		}
		if w.net.cut[a.name] {
			state += ", partitioned"
		}
		fmt.Fprintf(out, "agent %s node %d %s: holds %s\n", a.name, a.node, state, idList(a.m.Held()))
	}
	for _, ra := range w.roles {
		state := "no session"
		if ra.sess != nil {
			state = "in session"
		}
		if w.net.cut[ra.name] {
			state += ", partitioned"
		}
		fmt.Fprintf(out, "agent %s node %d role-played, %s\n", ra.name, ra.node, state)
	}
	for r := range w.cfg.Replicas {
		var idx []string
		for g := range w.gs.g {
			w.gs.read(r, g, func(st *statemachine.State) { idx = append(idx, strconv.FormatUint(st.LastIndex(), 10)) })
		}
		fmt.Fprintf(out, "m%d applied %s\n", r+1, strings.Join(idx, " "))
	}
}

func renderLine(st *statemachine.State, t *statemachine.Task) string {
	s := fmt.Sprintf("%s v%d %s desired=%s", tid(t.ID), t.SpecVersion, t.Status.State, t.Desired)
	if t.Node != 0 {
		s += fmt.Sprintf(" node=%d", t.Node)
	}
	for _, a := range t.Attachments {
		s += " " + control.AttachmentAddr(st, a)
		if a.Released {
			s += "(released)"
		}
	}
	return s
}

func idList(ids []statemachine.TaskID) string {
	if len(ids) == 0 {
		return "nothing"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = tid(id)
	}
	return strings.Join(s, ",")
}

// violations prints the checker's violations.
func (w *World) violations(out *strings.Builder) {
	vs := w.chk.Violations()
	if len(vs) == 0 {
		out.WriteString("no violation\n")
		return
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].AtSeconds < vs[j].AtSeconds })
	for _, v := range vs {
		fmt.Fprintf(out, "%s at %.3fs: %s\n", v.Invariant, v.AtSeconds, v.Message)
		for _, o := range v.Objects {
			fmt.Fprintf(out, "  %s\n", o)
		}
	}
}
