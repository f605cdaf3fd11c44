package steps

// The directives (words of package dialect; one datadriven directive
// each; one dialect for the components' steps, whoever takes them):
//
//	node n1 [cpu=N] [mem=N] [labels=zone=a,disk=ssd] [status=ready|down|…] [availability=active|pause|drain]
//	    upsert a node; node names map to IDs 1, 2, … in order of first mention
//	node-status n1 ready|disconnected|initializing|down
//	availability n1 active|pause|drain
//	network net subnet=10.0.0.0/29
//	create-service web [replicas=N] [mode=global] [restart=any|on-failure|none] [delay=5s] [max-attempts=N] [window=1m]
//		[lost-after=5m] [replace=true|false] [reconcile=best_score|keep_original|keep_replacement|longest_running]
//	    [networks=a,b] [image=v1] [constraints=node.labels.zone==a,…]
//	    [cpu=milli-cores] [mem=64M] [preferences=node.labels.zone,…] [max-per-node=N] [strategy=spread|binpack]
//	    [parallelism=N] [update-delay=…] [monitor=…] [failure-action=…] [max-failure-ratio=…] [order=…]
//	    [rollback-parallelism=N] [rollback-delay=…] [rollback-monitor=…] [rollback-failure-action=…] … (dialect.ServiceSpec)
//	update-service web [replicas=N] [image=…] [restart=…] [networks=…] [constraints=…] [preferences=…] …
//	remove-service web
//	rollback-service web
//
// The leader duties (shoal/engine/duty, over the in-memory cluster; see
// world.go):
//
//	schedule          one run of the real scheduler driver (scan → sched.Place
//	                  → one CmdAssign entry): "t3 web.1 -> n2: ok" per placed
//	                  task, "stays pending: <the reason the task carries>" per
//	                  other one, then a line per pending-reason proposal
//	advance 30s       move the fake clock, then one run of the timer duty (a
//	                  CmdTick entry only if a timer is due)
//	heartbeat n1      the monitor duty's Heartbeat at now: the TTL and any
//	                  status change it caused
//	rereported n1     MarkReReported; prints whether it counted
//	monitor-tick      one tick of the monitor duty: status changes, orphaning
//	leader-change     the monitor duty's BecomeLeader (failover grace)
//
// The agents and explicit component steps:
//
//	assign web.1 n2   the scheduler's pending → assigned, explicitly
//	report n1 web.1 running|failed|complete|shutdown|rejected|… [exit=N]
//	orphan web.1      the node monitor's → orphaned, explicitly
//	sync n1 seq=7|current|current-1|current+1 holds=web.1,web.2
//	dump              print the whole state
//	spec web.1        the spec a task runs (Service.SpecAt): the one the
//	                  scheduler reserves resources of and the agent is sent
//
// A task is named service.slot (a global service's slot is its node's
// name: agent.n1), meaning the slot's newest task; service.slot#k names the
// k-th oldest task of the slot. Dumps show tasks by short ID (t7 is the
// group's 7th task).

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/route"
	"shoal/sim/dialect"
	sm "shoal/statemachine"
)

// clockBase is the fake clock's start (unix nanoseconds); dumps print time
// relative to it.
const clockBase = int64(1_700_000_000) * int64(time.Second)

// Runner runs a scenario: the in-memory cluster, the leader duties over
// it, and the directives' output.
type Runner = runner

type runner struct {
	world
	s   *sm.State // the service group's state (group 1 of m)
	now int64     // the clock's reading, unix nanoseconds
	// err collects effect inconsistencies found by apply; the directive fails.
	err error

	nodeIDs   map[string]sm.NodeID
	nodeNames []string // by NodeID-1
	nets      []string // network names by NetworkID-1
}

// New returns a scenario's world: no node, no service, the clock at its
// start.
func New() *Runner { return newRunner() }

// Do runs one directive and returns what it prints. An error is a
// directive the runner refuses, or an inconsistency in the effects an
// entry reported (a deletion reported twice).
func (r *Runner) Do(op dialect.Op) (string, error) {
	out, err := r.run(op)
	err = errors.Join(err, r.err)
	r.err = nil
	return out, err
}

// CheckInvariants checks the service group's state (State.CheckInvariants).
func (r *Runner) CheckInvariants() error { return r.s.CheckInvariants() }

func newRunner() *runner {
	r := &runner{now: clockBase, nodeIDs: map[string]sm.NodeID{}}
	r.world = newWorld(r)
	r.s = r.m.State(1)
	return r
}

// args is a directive's arguments: positional words and key=value options.
type args struct {
	pos []string
	kv  map[string]string
}

func parseArgs(op dialect.Op, npos int, allowed ...string) (args, error) {
	if err := op.Want(npos, allowed...); err != nil {
		return args{}, err
	}
	a := args{pos: op.Pos, kv: map[string]string{}}
	for _, kv := range op.KV {
		a.kv[kv[0]] = kv[1]
	}
	return a, nil
}

func (r *runner) run(op dialect.Op) (string, error) {
	if err := dialect.Check(dialect.Scenario, op); err != nil {
		return "", err
	}
	if out, ok, err := r.runDuties(op); ok {
		return out, err
	}
	switch op.Cmd {
	case "node":
		return r.cmdNode(op)
	case "node-status":
		return r.cmdNodeStatus(op)
	case "remove-node":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", err
		}
		out := r.apply(sm.Command{Kind: sm.CmdRemoveNode, Node: r.node(a.pos[0])})
		r.syncMonitor()
		return out, nil
	case "availability":
		return r.cmdAvailability(op)
	case "network":
		return r.cmdNetwork(op)
	case "create-service", "update-service":
		return r.cmdService(op)
	case "rollback-service":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", err
		}
		return r.apply(sm.Command{Kind: sm.CmdRollbackService, Name: a.pos[0]}), nil
	case "remove-service":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", err
		}
		return r.apply(sm.Command{Kind: sm.CmdRemoveService, Name: a.pos[0]}), nil
	case "assign":
		return r.cmdAssign(op)
	case "report":
		return r.cmdReport(op)
	case "orphan":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", err
		}
		t, err := r.task(a.pos[0])
		if err != nil {
			return "", err
		}
		return r.apply(sm.Command{Kind: sm.CmdOrphan, Task: t.ID}), nil
	case "sync":
		return r.cmdSync(op)
	case "dump":
		return r.dump(), nil
	case "spec":
		a, err := parseArgs(op, 1)
		if err != nil {
			return "", err
		}
		t, err := r.task(a.pos[0])
		if err != nil {
			return "", err
		}
		return r.specLine(t), nil
	}
	return "", fmt.Errorf("unknown command %q", op.Cmd)
}

// apply applies one batch as the next entry of the service group at the
// fake clock's time (node and network commands also to the cluster group,
// as the engine fans them out) and describes the results and the
// deletions they caused.
func (r *runner) apply(cmds ...sm.Command) string {
	res, trailer := r.applyOut(cmds...)
	var b strings.Builder
	for _, x := range res {
		b.WriteString(resultLine(x))
	}
	return b.String() + trailer
}

func resultLine(res sm.Result) string {
	if err := res.Err(); err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	return "ok\n"
}

// applyOut applies like apply and returns the results and the lines about
// created and deleted tasks and services.
func (r *runner) applyOut(cmds ...sm.Command) ([]sm.Result, string) {
	names := r.taskNames() // deleted tasks are gone afterwards
	svcNames := map[sm.ServiceID]string{}
	for _, id := range r.s.ServiceIDs() {
		svcNames[id] = r.s.Service(id).Spec.Name
	}
	// Node and network commands are the cluster group's; its outbox
	// entries reach the service group in the same entry as the rest.
	batch := make([]sm.Command, 0, len(cmds))
	clusterRes := map[int]sm.Result{}
	delivered := map[int]int{} // outbox entries per cluster command
	for i := range cmds {
		if !sm.OutboxKind(cmds[i].Kind) {
			batch = append(batch, cmds[i])
			continue
		}
		var from uint64
		_ = r.m.ReadLocal(route.ClusterGroup, func(s *sm.State) { from = s.OutboxNext() - 1 })
		clusterRes[i] = r.m.Apply(route.ClusterGroup, cmds[i]).Results[0]
		_ = r.m.ReadLocal(route.ClusterGroup, func(s *sm.State) {
			for _, e := range s.Outbox(from) {
				batch = append(batch, sm.Command{Kind: sm.CmdDeliver, Group: 1, Entry: &e})
				delivered[i]++
			}
		})
	}
	out := r.m.Apply(1, batch...)
	results := make([]sm.Result, 0, len(cmds))
	k := 0
	for i := range cmds {
		if res, ok := clusterRes[i]; ok {
			results = append(results, res)
			k += delivered[i]
			continue
		}
		results = append(results, out.Results[k])
		k++
	}
	out.Results = results
	var b strings.Builder
	after := r.taskNames()
	for _, id := range r.s.TaskIDs() {
		if _, old := names[id]; !old {
			fmt.Fprintf(&b, "created task %s (%s) %s\n", shortID(id), after[id], r.s.Task(id).Status.State)
		}
	}
	deleted := map[[2]uint64]bool{}
	for _, e := range out.Effects {
		switch e.Kind {
		case sm.EffTaskDeleted, sm.EffServiceDeleted:
			k := [2]uint64{uint64(e.Kind), uint64(e.Task)}
			what := "task " + shortID(e.Task)
			if e.Kind == sm.EffServiceDeleted {
				k[1], what = uint64(e.Service), fmt.Sprintf("service %d (%s)", e.Service, svcNames[e.Service])
			}
			if deleted[k] {
				r.err = errors.Join(r.err, fmt.Errorf("entry %d reports the deletion of %s twice", r.m.Index(1), what))
			}
			deleted[k] = true
		}
		switch e.Kind {
		case sm.EffTaskDeleted:
			fmt.Fprintf(&b, "deleted task %s (%s)\n", shortID(e.Task), names[e.Task])
		case sm.EffServiceDeleted:
			fmt.Fprintf(&b, "deleted service %s\n", svcNames[e.Service])
		}
	}
	return out.Results, b.String()
}

// node returns a node's ID, giving a new name the next one.
func (r *runner) node(name string) sm.NodeID {
	if id, ok := r.nodeIDs[name]; ok {
		return id
	}
	r.nodeNames = append(r.nodeNames, name)
	id := sm.NodeID(len(r.nodeNames))
	r.nodeIDs[name] = id
	return id
}

func (r *runner) nodeName(id sm.NodeID) string {
	if id == 0 {
		return "-"
	}
	if int(id) <= len(r.nodeNames) {
		return r.nodeNames[id-1]
	}
	return fmt.Sprintf("node%d", id)
}

func (r *runner) netName(id sm.NetworkID) string {
	if id > 0 && int(id) <= len(r.nets) {
		return r.nets[id-1]
	}
	return fmt.Sprintf("net%d", id)
}

func (r *runner) cmdAssign(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 2)
	if err != nil {
		return "", err
	}
	t, err := r.task(a.pos[0])
	if err != nil {
		return "", err
	}
	return r.apply(sm.Command{Kind: sm.CmdAssign, Task: t.ID, Node: r.node(a.pos[1])}), nil
}

func (r *runner) cmdReport(op dialect.Op) (string, error) {
	rep, err := dialect.ParseReport(op)
	if err != nil {
		return "", err
	}
	t, err := r.task(rep.Task)
	if err != nil {
		return "", err
	}
	st, err := sm.ParseTaskState(rep.State)
	if err != nil {
		return "", err
	}
	return r.apply(sm.Command{Kind: sm.CmdTaskStatus, Node: r.node(rep.Node), Task: t.ID,
		State: st, ExitCode: rep.Exit, Message: rep.Message}), nil
}

func (r *runner) cmdSync(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 1, "seq", "holds")
	if err != nil {
		return "", err
	}
	id := r.node(a.pos[0])
	n := r.s.Node(id)
	v := a.kv["seq"]
	seqs, err := dialect.ParseSeqs(v)
	if err != nil || len(seqs) != 1 {
		return "", fmt.Errorf("seq=%s: want a number, current, current-N or current+N", v)
	}
	if seqs[0].Current && n == nil {
		return "", fmt.Errorf("seq=%s: node %s does not exist", v, a.pos[0])
	}
	var current uint64
	if n != nil {
		current = n.AssignSeq
	}
	seq := seqs[0].Of(current)
	var holds []sm.TaskID
	for _, name := range op.List("holds") {
		if n, err := strconv.ParseUint(strings.TrimPrefix(name, "t"), 10, 48); err == nil && strings.HasPrefix(name, "t") {
			holds = append(holds, sm.TaskID(1<<48|n)) // a raw handle, known to the manager or not
			continue
		}
		t, err := r.task(name)
		if err != nil {
			return "", err
		}
		holds = append(holds, t.ID)
	}
	results, trailer := r.applyOut(sm.Command{Kind: sm.CmdNodeSync, Node: id, Seq: seq, Tasks: holds})
	res := resultLine(results[0]) + trailer
	if results[0].Err() == nil {
		var destroy []string
		for _, tid := range r.s.SyncAnswer(id, holds) {
			destroy = append(destroy, shortID(tid))
		}
		res = fmt.Sprintf("seq=%d freed=%d destroy=[%s]\n%s", seq, results[0].ID, strings.Join(destroy, ","), res)
	}
	return res, nil
}

// task resolves service.slot[#k] to a task.
func (r *runner) task(name string) (*sm.Task, error) {
	svcName, slotName, k, err := dialect.TaskName(name)
	if err != nil {
		return nil, err
	}
	svc := r.s.ServiceByName(svcName)
	if svc == nil {
		return nil, fmt.Errorf("task %q: no service %q", name, svcName)
	}
	var slot uint32
	if id, ok := r.nodeIDs[slotName]; ok && svc.Spec.Mode == sm.ModeGlobal {
		slot = uint32(id)
	} else {
		n, err := strconv.ParseUint(slotName, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("task %q: slot %q is neither a number nor a node", name, slotName)
		}
		slot = uint32(n)
	}
	slots, tasks := r.s.SlotTasks(svc.ID)
	i := slices.Index(slots, slot)
	if i < 0 {
		return nil, fmt.Errorf("task %q: service %q has no slot %d", name, svcName, slot)
	}
	ts := tasks[i]
	if k == 0 {
		return ts[len(ts)-1], nil
	}
	if k > len(ts) {
		return nil, fmt.Errorf("task %q: slot has %d tasks", name, len(ts))
	}
	return ts[k-1], nil
}

// taskNames names every task service.slot#k.
func (r *runner) taskNames() map[sm.TaskID]string {
	m := map[sm.TaskID]string{}
	for _, sid := range r.s.ServiceIDs() {
		svc := r.s.Service(sid)
		slots, tasks := r.s.SlotTasks(sid)
		for i, n := range slots {
			for k, t := range tasks[i] {
				m[t.ID] = fmt.Sprintf("%s#%d", r.slotName(svc, n), k+1)
			}
		}
	}
	return m
}

func (r *runner) slotName(svc *sm.Service, n uint32) string {
	if svc.Spec.Mode == sm.ModeGlobal {
		return svc.Spec.Name + "." + r.nodeName(sm.NodeID(n))
	}
	return fmt.Sprintf("%s.%d", svc.Spec.Name, n)
}

// shortID drops the group bits of a task ID.
func shortID(id sm.TaskID) string { return fmt.Sprintf("t%d", uint64(id)&(1<<48-1)) }

func (r *runner) elapsed(at int64) string { return time.Duration(at - clockBase).String() }
