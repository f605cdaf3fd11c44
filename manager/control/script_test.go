package control

// Protocol scripts (testdata/*.txt, datadriven; regenerate the expected
// output with `go test ./manager/control/ -run TestScripts -rewrite` and
// review the diff). The world is one manager replica over an in-memory
// cluster of two service groups (duty.Memory): writes are committed to the
// cluster; this replica's reads of a group see the committed state unless
// the group lags.
//
//	session host=n1 [key=k1] [node=3]   OpenSession: the node's ID and the
//	                                    commits it made, or the wire error
//	node-status n1 down                 the node monitor's verdict
//	remove-node n1                      the user removes a node
//	deliver                             one run of the outbox duty (a new
//	                                    node reaches the service groups)
//	create-service web [replicas=N] [networks=net]
//	network net subnet=10.0.0.0/29
//	assign web.1 n1                     the scheduler's pending → assigned
//	lag group=G                         this replica stops applying group G
//	                                    (its reads see G as it is now, its
//	                                    feed sees none of G's entries)
//	catch-up group=G                    this replica applies G again (a
//	                                    commit to G, or a read barrier on
//	                                    it, catches it up too)
//	sync n1 [seq=G:N|G:current[+-k],…] [held=web.1,g1:99,…]
//	                                    Sync: the handles to destroy and,
//	                                    per group, the steps it took
//	status n1 web.1=running [web.2=failed …] [exit=N] [rereport]
//	                                    SubmitStatus: a verdict per report
//	                                    and whether the node was marked
//	monitor on|off                      the node monitor runs here or not
//	fail-submissions on|off [kind=K] [err=timeout|not-proposed]
//	                                    commands of kind K (default
//	                                    task-status) are not applied: the
//	                                    cluster answers with that error
//	                                    (default timeout)
//	submit network|remove-network|node NAME [subnet=S] [before-fanout]
//	                                    a user's or joiner's command through
//	                                    the leader duties' Submitter over a
//	                                    raw cluster (one that only routes
//	                                    and applies, as the engine does):
//	                                    its outcome and the groups that know
//	                                    NAME when it returns
//	known network|node NAME             the groups that know NAME
//	dump                                nodes, and each group's tasks
//
// The assignment stream's commands (open, poll, await, leader, quorum,
// snapshot-restore, …) are listed in script_stream_test.go.
//
// Tasks are named service.slot (the slot's newest task) or
// service.slot#k (its k-th oldest); gG:N is the raw handle of the N-th
// task of group G, known or not.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"shoal/cluster"
	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/route"
	sm "shoal/statemachine"
	"shoal/wire"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		w := newScriptWorld()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := w.run(d)
			if err != nil {
				t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
			}
			return out
		})
	})
}

// scriptWorld is the cluster (lead: what is committed) and this
// replica's view of it: a lagging group reads from a copy frozen at `lag`,
// until this replica commits to that group (it then applied everything) or
// the script catches it up.
type scriptWorld struct {
	lead   *duty.Memory
	sub    *duty.Submitter
	clk    *clock.Fake
	mu     sync.Mutex
	frozen map[int]*sm.State
	behind map[int][]appliedEntry // per lagging group: what this replica has not applied
	calls  map[int][]string       // per group, the reads and commits a call made

	// The assignment stream over this replica, its feed, and the cluster
	// group's leader as this replica knows it.
	feed     *Feed
	stream   *Stream
	leader   uint64
	notice   chan struct{}
	noQuorum bool
	// localFails is the service group whose local reads fail (0: none).
	localFails int
	agents     map[string]*scriptAgent

	commits    []string
	monitoring bool
	marked     []sm.NodeID
	hosts      map[string]sm.NodeID
}

func newScriptWorld() *scriptWorld {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m := duty.NewMemory(2, clk)
	w := &scriptWorld{lead: m, sub: duty.NewSubmitter(m, nil), clk: clk, frozen: map[int]*sm.State{},
		behind: map[int][]appliedEntry{}, calls: map[int][]string{}, monitoring: true, hosts: map[string]sm.NodeID{},
		feed: NewFeed(2, nil, 1024, 16), leader: 1, notice: make(chan struct{}), agents: map[string]*scriptAgent{}}
	m.OnApply(w.onApply)
	w.stream = newStream(streamConfig{Reads: w, Leaders: w, Feed: w.feed, Clock: clk})
	return w
}

// appliedEntry is one entry's effects, as the cluster's apply hook gets
// them.
type appliedEntry struct {
	index   uint64
	effects []sm.Effect
}

// onApply is the cluster's apply hook: this replica's feed sees an entry
// when this replica applies it, so not while the group lags.
func (w *scriptWorld) onApply(g int, index uint64, effects []sm.Effect) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.frozen[g] != nil {
		w.behind[g] = append(w.behind[g], appliedEntry{index, slices.Clone(effects)})
		return
	}
	w.feed.OnApply(g, index, effects)
}

// catchUpLocked has this replica apply everything committed to group g.
func (w *scriptWorld) catchUpLocked(g int) {
	delete(w.frozen, g)
	for _, e := range w.behind[g] {
		w.feed.OnApply(g, e.index, e.effects)
	}
	delete(w.behind, g)
}

// Groups, ReadLocal, Read and SubmitToGroup: the sync fan-out's view.

func (w *scriptWorld) Groups() int { return w.lead.Groups() }

func (w *scriptWorld) record(g int, step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[g] = append(w.calls[g], step)
}

func (w *scriptWorld) ReadLocal(g int, fn func(*sm.State)) error {
	w.record(g, "local read")
	w.mu.Lock()
	if g > 0 && g == w.localFails {
		w.mu.Unlock()
		return fmt.Errorf("group %d is not ready here", g)
	}
	st := w.frozen[g]
	w.mu.Unlock()
	if st != nil {
		fn(st)
		return nil
	}
	return w.lead.ReadLocal(g, fn)
}

// Read is a read barrier: it fails without a quorum; otherwise this
// replica first applies everything committed (as the engine's read
// index), then reads.
func (w *scriptWorld) Read(ctx context.Context, g int, fn func(*sm.State)) error {
	w.record(g, "quorum read")
	w.mu.Lock()
	if w.noQuorum {
		w.mu.Unlock()
		return cluster.ErrTimeout
	}
	w.catchUpLocked(g)
	w.mu.Unlock()
	return w.lead.Read(ctx, g, fn)
}

func (w *scriptWorld) SubmitToGroup(ctx context.Context, g int, cmd sm.Command) (sm.Result, error) {
	res, err := w.lead.SubmitToGroup(ctx, g, cmd)
	switch {
	case err == nil:
		w.record(g, "commit")
	case res.Code != sm.CodeOK:
		w.record(g, "commit refused ("+res.Msg+")")
	default:
		// A cluster error: nothing is known to be applied here.
		w.record(g, "commit failed")
		return res, err
	}
	w.mu.Lock()
	w.catchUpLocked(g) // the engine returns once this replica applied it
	w.mu.Unlock()
	return res, err
}

// registrar is the session's view: local reads as above, commits through
// the leader duties' submitter, each recorded.
type scriptRegistrar struct{ w *scriptWorld }

func (r scriptRegistrar) ReadLocal(g int, fn func(*sm.State)) error {
	r.w.mu.Lock()
	st := r.w.frozen[g]
	r.w.mu.Unlock()
	if st != nil {
		fn(st)
		return nil
	}
	return r.w.lead.ReadLocal(g, fn)
}

func (r scriptRegistrar) Submit(ctx context.Context, cmd sm.Command) (sm.Result, error) {
	r.w.commits = append(r.w.commits, cmd.Kind.String())
	return r.w.sub.Submit(ctx, cmd)
}

func (r scriptRegistrar) SubmitBeforeFanout(ctx context.Context, cmd sm.Command) (sm.Result, error) {
	r.w.commits = append(r.w.commits, cmd.Kind.String())
	return r.w.sub.SubmitBeforeFanout(ctx, cmd)
}

var _ Registrar = scriptRegistrar{}

// Monitoring and MarkReReported: the node monitor as status submission
// sees it.
func (w *scriptWorld) Monitoring() bool { return w.monitoring }

func (w *scriptWorld) MarkReReported(n sm.NodeID) bool {
	w.marked = append(w.marked, n)
	return true
}

var (
	_ Groups    = (*scriptWorld)(nil)
	_ ReReports = (*scriptWorld)(nil)
)

func (w *scriptWorld) run(d *datadriven.TestData) (string, error) {
	pos, kv := scriptArgs(d)
	if allowed, ok := scriptOptions[d.Cmd]; ok {
		for k := range kv {
			if !slices.Contains(allowed, k) {
				return "", fmt.Errorf("unknown option %q (allowed: %s)", k, strings.Join(allowed, ", "))
			}
		}
	}
	need := func(n int) error {
		if len(pos) != n {
			return fmt.Errorf("want %d positional arguments, got %q", n, pos)
		}
		return nil
	}
	ctx := context.Background()
	switch d.Cmd {
	case "session":
		return w.cmdSession(kv)
	case "remove-node":
		if err := need(1); err != nil {
			return "", err
		}
		id, err := w.node(pos[0])
		if err != nil {
			return "", err
		}
		return w.apply(sm.Command{Kind: sm.CmdRemoveNode, Node: id}), nil
	case "node-status":
		if err := need(2); err != nil {
			return "", err
		}
		id, err := w.node(pos[0])
		if err != nil {
			return "", err
		}
		st, err := wire.ParseNodeStatus(pos[1])
		if err != nil {
			return "", err
		}
		return w.apply(sm.Command{Kind: sm.CmdSetNodeStatus, Node: id, NodeStatus: st}), nil
	case "deliver":
		if err := duty.NewOutboxDuty(w.lead, duty.OutboxConfig{}).RunOnce(ctx); err != nil {
			return "", err
		}
		return "ok", nil
	case "network":
		if err := need(1); err != nil {
			return "", err
		}
		return w.apply(sm.Command{Kind: sm.CmdCreateNetwork, NetworkSpec: &sm.Network{ID: sm.NetworkID(len(w.lead.State(route.ClusterGroup).NetworkIDs()) + 1), Name: pos[0], Subnet: kv["subnet"]}}), nil
	case "create-service":
		if err := need(1); err != nil {
			return "", err
		}
		spec := &sm.ServiceSpec{Name: pos[0], Replicas: 1}
		if v, ok := kv["replicas"]; ok {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return "", err
			}
			spec.Replicas = uint32(n)
		}
		if v, ok := kv["networks"]; ok {
			spec.Networks = strings.Split(v, ",")
		}
		if v, ok := kv["cmd"]; ok {
			spec.Command = strings.Fields(v)
		}
		out := w.apply(sm.Command{Kind: sm.CmdCreateService, Spec: spec})
		// The service's group leases its networks' address blocks.
		if err := duty.NewOutboxDuty(w.lead, duty.OutboxConfig{}).RunOnce(ctx); err != nil {
			return "", err
		}
		return out, nil
	case "remove-service":
		if err := need(1); err != nil {
			return "", err
		}
		return w.apply(sm.Command{Kind: sm.CmdRemoveService, Name: pos[0]}), nil
	case "assign":
		if err := need(2); err != nil {
			return "", err
		}
		t, _, err := w.task(pos[0])
		if err != nil {
			return "", err
		}
		n, err := w.node(pos[1])
		if err != nil {
			return "", err
		}
		return w.apply(sm.Command{Kind: sm.CmdAssign, Task: t.ID, Node: n}), nil
	case "lag", "catch-up":
		g, err := strconv.Atoi(kv["group"])
		if err != nil || g < 0 || g > w.Groups() {
			return "", fmt.Errorf("want group=0..%d", w.Groups())
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if d.Cmd == "lag" {
			if w.frozen[g] == nil {
				w.frozen[g] = w.lead.State(g).Clone()
			}
		} else {
			w.catchUpLocked(g)
		}
		return "ok", nil
	case "sync":
		if err := need(1); err != nil {
			return "", err
		}
		return w.cmdSync(pos[0], kv)
	case "status":
		return w.cmdStatus(d)
	case "monitor", "fail-submissions":
		if err := need(1); err != nil {
			return "", err
		}
		on := pos[0] == "on"
		if !on && pos[0] != "off" {
			return "", fmt.Errorf("want on or off, got %q", pos[0])
		}
		if d.Cmd == "monitor" {
			w.monitoring = on
		} else if on {
			kind, fail := sm.CmdTaskStatus, cluster.ErrTimeout
			if v, ok := kv["kind"]; ok {
				k, ok := cmdKindByName(v)
				if !ok {
					return "", fmt.Errorf("kind=%q: not a command kind", v)
				}
				kind = k
			}
			switch kv["err"] {
			case "", "timeout":
			case "not-proposed":
				fail = cluster.ErrNotProposed
			default:
				return "", fmt.Errorf("err=%q: want timeout or not-proposed", kv["err"])
			}
			w.lead.FailSubmissions(func(c sm.Command) error {
				if c.Kind == kind {
					return fail
				}
				return nil
			})
		} else {
			w.lead.FailSubmissions(nil)
		}
		return "ok", nil
	case "dump":
		return w.dump(), nil
	case "submit":
		return w.cmdSubmit(pos, kv)
	case "known":
		if err := need(2); err != nil {
			return "", err
		}
		return w.known(pos[0], pos[1])
	}
	if out, ok, err := w.runStream(d, pos, kv); ok {
		return out, err
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// scriptOptions are the key=value options each command takes (status reads
// its own arguments).
var scriptOptions = map[string][]string{
	"session": {"host", "key", "node"}, "remove-node": nil, "node-status": nil, "deliver": nil,
	"network": {"subnet"}, "create-service": {"replicas", "networks", "cmd"}, "remove-service": nil, "assign": nil,
	"lag": {"group"}, "catch-up": {"group"}, "sync": {"seq", "held"},
	"monitor": nil, "fail-submissions": {"kind", "err"}, "dump": nil,
	"submit": {"subnet"}, "known": nil,
}

func scriptArgs(d *datadriven.TestData) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, c := range d.CmdArgs {
		if len(c.Vals) == 0 {
			pos = append(pos, c.Key)
		} else {
			kv[c.Key] = strings.Join(c.Vals, ",")
		}
	}
	return pos, kv
}

// apply submits one user command to the cluster and prints its outcome.
func (w *scriptWorld) apply(cmd sm.Command) string {
	o := w.lead.SubmitMany(context.Background(), []sm.Command{cmd})[0]
	if err := o.Err(); err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func (w *scriptWorld) node(name string) (sm.NodeID, error) {
	if id, ok := w.hosts[name]; ok {
		return id, nil
	}
	if n, err := strconv.ParseUint(name, 10, 64); err == nil {
		return sm.NodeID(n), nil
	}
	return 0, fmt.Errorf("no node %q (open a session for it first)", name)
}

func (w *scriptWorld) hostOf(id sm.NodeID) string {
	for h, n := range w.hosts {
		if n == id {
			return h
		}
	}
	return fmt.Sprintf("node %d", id)
}

func (w *scriptWorld) cmdSession(kv map[string]string) (string, error) {
	req := &wire.SessionRequest{Key: kv["key"], Node: wire.NodeDescription{Hostname: kv["host"]}}
	if v, ok := kv["node"]; ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return "", err
		}
		req.NodeID = sm.NodeID(n)
	}
	w.commits = nil
	got, err := OpenSession(context.Background(), scriptRegistrar{w}, req)
	var b strings.Builder
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		fmt.Fprintf(&b, "error %s: %s", we.Code, we.Message)
		if we.RetryAfter != 0 {
			fmt.Fprintf(&b, " (retry after %v)", time.Duration(we.RetryAfter))
		}
	case err != nil:
		fmt.Fprintf(&b, "error: %v", err)
	default:
		fmt.Fprintf(&b, "node %d (the cluster held %d nodes)", got.Node, got.Nodes)
		if req.Node.Hostname != "" {
			w.hosts[req.Node.Hostname] = got.Node
		}
	}
	if len(w.commits) > 0 {
		fmt.Fprintf(&b, "\ncommitted: %s", strings.Join(w.commits, ", "))
	} else {
		b.WriteString("\ncommitted: nothing")
	}
	return b.String(), nil
}

// task finds a task by name in any group.
func (w *scriptWorld) task(name string) (*sm.Task, string, error) {
	if g, n, ok := strings.Cut(name, ":"); ok && strings.HasPrefix(g, "g") {
		gi, err1 := strconv.ParseUint(g[1:], 10, 16)
		ni, err2 := strconv.ParseUint(n, 10, 48)
		if err1 != nil || err2 != nil {
			return nil, "", fmt.Errorf("handle %q: want gG:N", name)
		}
		return &sm.Task{ID: sm.TaskID(gi<<48 | ni)}, name, nil
	}
	svcName, slotName, ok := strings.Cut(name, ".")
	if !ok {
		return nil, "", fmt.Errorf("task %q: want service.slot, service.slot#k or gG:N", name)
	}
	slotName, kth, hasK := strings.Cut(slotName, "#")
	slot, err := strconv.ParseUint(slotName, 10, 32)
	if err != nil {
		return nil, "", fmt.Errorf("task %q: slot %q is not a number", name, slotName)
	}
	for g := 1; g <= w.Groups(); g++ {
		st := w.lead.State(g)
		svc := st.ServiceByName(svcName)
		if svc == nil {
			continue
		}
		slots, tasks := st.SlotTasks(svc.ID)
		i := slices.Index(slots, uint32(slot))
		if i < 0 {
			return nil, "", fmt.Errorf("task %q: service %q has no slot %d", name, svcName, slot)
		}
		ts := tasks[i]
		if !hasK {
			return ts[len(ts)-1], name, nil
		}
		k, err := strconv.Atoi(kth)
		if err != nil || k < 1 || k > len(ts) {
			return nil, "", fmt.Errorf("task %q: slot %d has %d tasks", name, slot, len(ts))
		}
		return ts[k-1], name, nil
	}
	return nil, "", fmt.Errorf("task %q: no service %q", name, svcName)
}

// taskName names a handle as the scripts do: service.slot#k for a task
// the cluster knows, gG:N otherwise.
func (w *scriptWorld) taskName(id sm.TaskID) string {
	g := route.TaskGroup(id)
	raw := fmt.Sprintf("g%d:%d", g, uint64(id)&(1<<48-1))
	if g < 1 || g > w.Groups() {
		return raw
	}
	st := w.lead.State(g)
	t := st.Task(id)
	if t == nil {
		return raw
	}
	svc := st.Service(t.Service)
	if svc == nil {
		return raw
	}
	slots, tasks := st.SlotTasks(svc.ID)
	if i := slices.Index(slots, t.Slot); i >= 0 {
		if k := slices.IndexFunc(tasks[i], func(x *sm.Task) bool { return x.ID == id }); k >= 0 {
			return fmt.Sprintf("%s.%d#%d", svc.Spec.Name, t.Slot, k+1)
		}
	}
	return raw
}

func (w *scriptWorld) cmdSync(nodeName string, kv map[string]string) (string, error) {
	node, err := w.node(nodeName)
	if err != nil {
		return "", err
	}
	req := &wire.SyncRequest{NodeID: node, Seqs: make([]uint64, w.Groups()+1)}
	if v := kv["seq"]; v != "" {
		for _, s := range strings.Split(v, ",") {
			gs, ns, ok := strings.Cut(s, ":")
			g, err := strconv.Atoi(gs)
			if !ok || err != nil || g < 1 || g > w.Groups() {
				return "", fmt.Errorf("seq %q: want G:N or G:current[+-k]", s)
			}
			seq, err := w.seqOf(node, g, ns)
			if err != nil {
				return "", err
			}
			req.Seqs[g] = seq
		}
	}
	if v := kv["held"]; v != "" {
		for _, name := range strings.Split(v, ",") {
			t, _, err := w.task(name)
			if err != nil {
				return "", err
			}
			req.Held = append(req.Held, t.ID)
		}
	}
	w.calls = map[int][]string{}
	destroy, err := Sync(context.Background(), w, req)
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	} else {
		names := make([]string, len(destroy))
		for i, id := range destroy {
			names[i] = w.taskName(id)
		}
		fmt.Fprintf(&b, "destroy: [%s]\n", strings.Join(names, " "))
	}
	for g := 1; g <= w.Groups(); g++ {
		if c := w.calls[g]; len(c) > 0 {
			fmt.Fprintf(&b, "group %d: %s\n", g, strings.Join(c, ", "))
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// seqOf reads a sequence: a number, or current[+-k] (the node's newest
// assignment sequence in group g, as committed).
func (w *scriptWorld) seqOf(node sm.NodeID, g int, s string) (uint64, error) {
	if rest, ok := strings.CutPrefix(s, "current"); ok {
		var cur uint64
		if n := w.lead.State(g).Node(node); n != nil {
			cur = n.AssignSeq
		}
		if rest == "" {
			return cur, nil
		}
		k, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("seq %q: want current, current+k or current-k", s)
		}
		return uint64(int64(cur) + k), nil
	}
	return strconv.ParseUint(s, 10, 64)
}

func (w *scriptWorld) cmdStatus(d *datadriven.TestData) (string, error) {
	if len(d.CmdArgs) < 2 {
		return "", fmt.Errorf("want: status n1 web.1=running … [exit=N] [rereport]")
	}
	node, err := w.node(d.CmdArgs[0].Key)
	if err != nil {
		return "", err
	}
	b := &wire.StatusBatch{NodeID: node}
	var names []string
	var exit int32
	for _, a := range d.CmdArgs[1:] {
		switch {
		case a.Key == "rereport" && len(a.Vals) == 0:
			b.ReReport = true
			continue
		case a.Key == "exit" && len(a.Vals) == 1:
			e, err := strconv.Atoi(a.Vals[0])
			if err != nil {
				return "", err
			}
			exit = int32(e)
			continue
		case len(a.Vals) != 1:
			return "", fmt.Errorf("report %q: want task=state", a.String())
		}
		t, _, err := w.task(a.Key)
		if err != nil {
			return "", err
		}
		s, err := wire.ParseTaskState(a.Vals[0])
		if err != nil {
			return "", err
		}
		b.Reports = append(b.Reports, wire.StatusReport{Task: t.ID, State: s})
		names = append(names, a.Key+" "+a.Vals[0])
	}
	for i := range b.Reports {
		b.Reports[i].ExitCode = exit
	}
	w.marked = nil
	ack, err := SubmitStatus(context.Background(), w.sub, w, b)
	if err != nil {
		return "error: " + err.Error(), nil
	}
	var out strings.Builder
	for i, n := range names {
		fmt.Fprintf(&out, "%s: %s", n, ack.Results[i])
		if m := ack.Messages[i]; m != "" {
			fmt.Fprintf(&out, " (%s)", m)
		}
		out.WriteString("\n")
	}
	if b.ReReport {
		if len(w.marked) > 0 {
			fmt.Fprintf(&out, "re-report: %s marked re-reported", w.hostOf(w.marked[0]))
		} else {
			out.WriteString("re-report: not marked")
		}
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

func (w *scriptWorld) dump() string {
	var b strings.Builder
	cs := w.lead.State(route.ClusterGroup)
	for _, id := range cs.NodeIDs() {
		n := cs.Node(id)
		fmt.Fprintf(&b, "node %d %s: %s\n", id, n.Name, n.Status)
	}
	for g := 1; g <= w.Groups(); g++ {
		st := w.lead.State(g)
		for _, id := range st.TaskIDs() {
			t := st.Task(id)
			fmt.Fprintf(&b, "group %d %s: node=%d %s desired=%s", g, w.taskName(id), t.Node, t.Status.State, t.Desired)
			if n := st.Node(t.Node); n != nil && t.Node != 0 {
				fmt.Fprintf(&b, " (node seq %d)", n.AssignSeq)
			}
			for _, a := range t.Attachments {
				rel := "held"
				if a.Released {
					rel = "released"
				}
				fmt.Fprintf(&b, " %d.%d.%d.%d %s", a.Addr>>24, a.Addr>>16&0xff, a.Addr>>8&0xff, a.Addr&0xff, rel)
			}
			b.WriteString("\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cmdKindByName is the command kind a script names (as CmdKind.String
// prints it).
func cmdKindByName(name string) (sm.CmdKind, bool) {
	for k := sm.CmdKind(0); k < 64; k++ {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

// rawCluster is the script's cluster without Memory's own removal check
// and outbox delivery: its SubmitMany only routes each command to its
// groups and applies it, as the engine's does, so what `submit` shows is
// the Submitter's doing.
type rawCluster struct{ *duty.Memory }

func (r rawCluster) SubmitMany(_ context.Context, cmds []sm.Command) []route.Outcome {
	out := make([]route.Outcome, len(cmds))
	for i := range cmds {
		gs, rej := route.Groups(&cmds[i], r.Groups(), nil)
		if rej.Code != sm.CodeOK {
			out[i].Result = rej
			continue
		}
		for k, g := range gs {
			res := r.Apply(g, cmds[i]).Results[0]
			if k == 0 || out[i].Result.Code == sm.CodeOK && res.Code != sm.CodeOK {
				out[i].Result = res
			}
		}
	}
	return out
}

// cmdSubmit submits one command through a Submitter over the raw cluster
// and prints its outcome and where the object is known on return.
func (w *scriptWorld) cmdSubmit(pos []string, kv map[string]string) (string, error) {
	if len(pos) < 2 || len(pos) > 3 || len(pos) == 3 && pos[2] != "before-fanout" {
		return "", fmt.Errorf("want: submit network|remove-network|node|remove-node NAME [before-fanout]")
	}
	ctx := context.Background()
	sub := duty.NewSubmitter(rawCluster{w.lead}, nil)
	kind, name := pos[0], pos[1]
	var cmd sm.Command
	switch kind {
	case "network":
		cmd = sm.Command{Kind: sm.CmdCreateNetwork, NetworkSpec: &sm.Network{
			ID: sm.NetworkID(len(w.lead.State(route.ClusterGroup).NetworkIDs()) + 1), Name: name, Subnet: kv["subnet"]}}
	case "remove-network":
		cmd = sm.Command{Kind: sm.CmdRemoveNetwork, Name: name}
	case "node":
		res, err := sub.Submit(ctx, sm.Command{Kind: sm.CmdReserveNodeID})
		if err != nil {
			return "", err
		}
		id := sm.NodeID(res.ID)
		w.hosts[name] = id
		cmd = sm.Command{Kind: sm.CmdUpsertNode, NodeSpec: &sm.Node{ID: id, Name: name, Role: sm.RoleWorker, Status: sm.NodeReady}}
	case "remove-node":
		id, err := w.node(name)
		if err != nil {
			return "", err
		}
		cmd = sm.Command{Kind: sm.CmdRemoveNode, Node: id}
	default:
		return "", fmt.Errorf("submit %q: want network, remove-network, node or remove-node", kind)
	}
	var err error
	if len(pos) == 3 {
		_, err = sub.SubmitBeforeFanout(ctx, cmd)
	} else {
		_, err = sub.Submit(ctx, cmd)
	}
	out := "ok"
	if err != nil {
		out = "refused: " + err.Error()
	}
	what := strings.TrimPrefix(kind, "remove-")
	known, kerr := w.known(what, name)
	if kerr != nil {
		return "", kerr
	}
	return out + "\n" + known, nil
}

// known prints the groups whose state holds the network or node name.
func (w *scriptWorld) known(kind, name string) (string, error) {
	var id sm.NodeID
	switch kind {
	case "network":
	case "node":
		var err error
		if id, err = w.node(name); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("known %q: want network or node", kind)
	}
	var in []string
	for g := 0; g <= w.Groups(); g++ {
		st := w.lead.State(g)
		if kind == "network" && st.NetworkByName(name) != nil || kind == "node" && st.Node(id) != nil {
			in = append(in, strconv.Itoa(g))
		}
	}
	if len(in) == 0 {
		return kind + " " + name + " known in no group", nil
	}
	return kind + " " + name + " known in groups " + strings.Join(in, " "), nil
}
