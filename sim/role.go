package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/sim/dialect"
	"shoal/statemachine"
	"shoal/wire"
)

// rolePlayed is a node whose agent the script plays: no agent.Machine,
// no executor; each message it sends is a directive (session, heartbeat,
// report, rereported, assignments, sync), sent on the simulated network
// like a real agent's, and the directive waits for the answer (or the
// call's timeout) and prints it. A script can so make an agent misbehave
// (report what it never ran, sync with a stale sequence, never send the
// re-report marker) or time a message to the millisecond.
//
// The checker sees no executor here: a role-played node holds no address
// in its view, and quiescence does not wait for a role-played node.
type rolePlayed struct {
	name string
	desc wire.NodeDescription
	key  string
	node statemachine.NodeID
	sess *wire.Session
	// cursor and seqs are what the assignment frames it asked for
	// brought it to.
	cursor wire.Cursor
	seqs   []uint64
}

// role returns the role-played agent named name, or nil.
func (w *World) role(name string) *rolePlayed {
	for _, ra := range w.roles {
		if ra.name == name {
			return ra
		}
	}
	return nil
}

// roleCall sends req from ra and runs the world until its answer (or the
// call's timeout).
func (w *World) roleCall(ra *rolePlayed, req wire.Message, timeout time.Duration) (wire.Message, error) {
	var (
		resp wire.Message
		err  error
		done bool
	)
	w.net.call(ra.name, req, timeout, func(m wire.Message, e error) { resp, err, done = m, e, true })
	for !done {
		w.run(time.Millisecond)
	}
	return resp, err
}

// roleDo runs a directive of a role-played agent: ok is false when op is
// not one, or names no role-played agent.
func (w *World) roleDo(op Op) (out string, ok bool, err error) {
	if op.Cmd == "node" {
		if len(op.Pos) != 2 || op.Pos[1] != "role-played" {
			return "", true, fmt.Errorf("node wants a name and role-played: node n1 role-played [cpu=N] [mem=N] [labels=k=v,…]")
		}
		out, err := w.newRole(op)
		return out, true, err
	}
	if len(op.Pos) < 1 {
		return "", false, nil
	}
	ra := w.role(op.Pos[0])
	if ra == nil {
		return "", false, nil
	}
	var req wire.Message
	timeout := callTimeout
	if op.Cmd == "session" {
		if err := op.Only(1); err != nil {
			return "", true, err
		}
		req = &wire.SessionRequest{NodeID: ra.node, Node: ra.desc, Key: ra.key}
		if ra.node != 0 {
			req.(*wire.SessionRequest).Key = ""
		}
	} else {
		if ra.sess == nil {
			return "", true, fmt.Errorf("%s has no session (session %s opens one)", ra.name, ra.name)
		}
		var err error
		if req, err = w.roleRequest(ra, op); err != nil {
			return "", true, err
		}
		if req == nil {
			return "", false, nil
		}
	}
	resp, err := w.roleCall(ra, req, timeout)
	if err != nil {
		return "error: " + err.Error() + "\n", true, nil
	}
	switch x := resp.(type) {
	case *wire.Session:
		ra.sess = x
		if x.NodeID != ra.node {
			ra.node = x.NodeID
			ra.cursor, ra.seqs = nil, nil
		}
	case *wire.Assignments:
		ra.cursor = x.ResultsIn
		if x.Seqs != nil {
			ra.seqs = slices.Clone(x.Seqs)
		}
	}
	return describe(resp) + "\n", true, nil
}

// newRole makes a role-played agent and opens its first session.
func (w *World) newRole(op Op) (string, error) {
	if err := op.Only(2, "cpu", "mem", "labels"); err != nil {
		return "", err
	}
	name := op.Pos[0]
	for _, a := range w.agents {
		if a.name == name {
			return "", fmt.Errorf("%s is a real agent (agent-up), not role-played", name)
		}
	}
	if w.role(name) != nil {
		return "", fmt.Errorf("%s is role-played already (session %s opens a new session)", name, name)
	}
	ra := &rolePlayed{name: name, key: name + "-role",
		desc: wire.NodeDescription{Hostname: name, CPU: 64000, Memory: 64 << 30, AgentVersion: "role-played"}}
	var err error
	if v, ok := op.Get("cpu"); ok {
		if ra.desc.CPU, err = strconv.ParseInt(v, 10, 64); err != nil {
			return "", fmt.Errorf("cpu wants milli-cores, got %q", v)
		}
	}
	if v, ok := op.Get("mem"); ok {
		if ra.desc.Memory, err = dialect.Size(v); err != nil {
			return "", fmt.Errorf("mem wants bytes (64M, 2G), got %q", v)
		}
	}
	if v, ok := op.Get("labels"); ok {
		if ra.desc.Labels, err = dialect.Labels(v); err != nil {
			return "", err
		}
	}
	w.roles = append(w.roles, ra)
	out, _, err := w.roleDo(Op{Cmd: "session", Pos: []string{name}})
	return out, err
}

// roleRequest builds the message a session's directive sends (nil: op is
// no directive of a role-played agent).
func (w *World) roleRequest(ra *rolePlayed, op Op) (wire.Message, error) {
	s := ra.sess
	switch op.Cmd {
	case "heartbeat":
		if err := op.Only(1); err != nil {
			return nil, err
		}
		return &wire.Heartbeat{NodeID: s.NodeID, SessionID: s.SessionID}, nil
	case "report":
		rep, err := dialect.ParseReport(op)
		if err != nil {
			return nil, err
		}
		id, err := w.task(rep.Task)
		if err != nil {
			return nil, err
		}
		st, err := statemachine.ParseTaskState(rep.State)
		if err != nil {
			return nil, err
		}
		return &wire.StatusBatch{NodeID: s.NodeID, SessionID: s.SessionID, Reports: []wire.StatusReport{{
			Task: id, State: st, ExitCode: rep.Exit, Message: rep.Message, At: w.clk.Now().UnixNano()}}}, nil
	case "rereported":
		if err := op.Only(1, "holds"); err != nil {
			return nil, err
		}
		held, err := w.taskList(op)
		if err != nil {
			return nil, err
		}
		return &wire.StatusBatch{NodeID: s.NodeID, SessionID: s.SessionID, ReReport: true, Held: held}, nil
	case "assignments":
		if err := op.Only(1, "cursor"); err != nil {
			return nil, err
		}
		cur := ra.cursor
		if v, ok := op.Get("cursor"); ok {
			cur = nil
			if v != "none" {
				for _, x := range strings.Split(v, ",") {
					n, err := strconv.ParseUint(x, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("cursor wants numbers (one per group, the cluster group first) or none, got %q", v)
					}
					cur = append(cur, n)
				}
			}
		}
		return &wire.AssignmentsRequest{NodeID: s.NodeID, SessionID: s.SessionID, Cursor: cur}, nil
	case "sync":
		if err := op.Only(1, "seqs", "holds"); err != nil {
			return nil, err
		}
		held, err := w.taskList(op)
		if err != nil {
			return nil, err
		}
		seqs := ra.seqs
		if v, ok := op.Get("seqs"); ok {
			if seqs, err = w.roleSeqs(ra, v); err != nil {
				return nil, err
			}
		}
		return &wire.SyncRequest{NodeID: s.NodeID, SessionID: s.SessionID, Seqs: seqs, Held: held}, nil
	}
	return nil, nil
}

// roleSeqs reads a sync's sequences: one per group, the cluster group
// first, each a number, current (the node's sequence in that group as the
// leader's state holds it) or current-N / current+N.
func (w *World) roleSeqs(ra *rolePlayed, v string) ([]uint64, error) {
	seqs, err := dialect.ParseSeqs(v)
	if err != nil {
		return nil, fmt.Errorf("seqs: %w", err)
	}
	out := make([]uint64, len(seqs))
	for g, sq := range seqs {
		var cur uint64
		if g <= w.cfg.Groups {
			w.gs.read(w.leader, g, func(st *statemachine.State) {
				if n := st.Node(ra.node); n != nil {
					cur = n.AssignSeq
				}
			})
		}
		out[g] = sq.Of(cur)
	}
	return out, nil
}

// taskList resolves a directive's holds= list of tasks.
func (w *World) taskList(op Op) ([]statemachine.TaskID, error) {
	v, ok := op.Get("holds")
	if !ok || v == "" {
		return nil, nil
	}
	var out []statemachine.TaskID
	for _, name := range strings.Split(v, ",") {
		id, err := w.task(name)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// task resolves a task's name as the leader's state holds it:
// service.slot (the slot's newest task), service.slot#k (its k-th
// oldest), or an ID as dumps print it (t1.5: group 1's 5th task; known
// to the managers or not).
func (w *World) task(name string) (statemachine.TaskID, error) {
	if g, n, ok := strings.Cut(strings.TrimPrefix(name, "t"), "."); ok && strings.HasPrefix(name, "t") {
		gi, err1 := strconv.ParseUint(g, 10, 16)
		ni, err2 := strconv.ParseUint(n, 10, 48)
		if err1 == nil && err2 == nil {
			return statemachine.TaskID(gi<<48 | ni), nil
		}
	}
	svcName, slotName, kth, err := dialect.TaskName(name)
	if err != nil {
		return 0, fmt.Errorf("%w (or an ID such as t1.5)", err)
	}
	slot, err := strconv.ParseUint(slotName, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("task %q: slot %q is not a number", name, slotName)
	}
	var (
		id    statemachine.TaskID
		found bool
		fail  error
	)
	for g := 1; g <= w.cfg.Groups && !found; g++ {
		w.gs.read(w.leader, g, func(st *statemachine.State) {
			svc := st.ServiceByName(svcName)
			if svc == nil {
				return
			}
			found = true
			slots, tasks := st.SlotTasks(svc.ID)
			i := slices.Index(slots, uint32(slot))
			if i < 0 {
				fail = fmt.Errorf("task %q: service %q has no slot %d", name, svcName, slot)
				return
			}
			ts := tasks[i]
			k := len(ts)
			if kth > 0 {
				if kth > len(ts) {
					fail = fmt.Errorf("task %q: the slot has %d tasks", name, len(ts))
					return
				}
				k = kth
			}
			id = ts[k-1].ID
		})
	}
	if !found {
		return 0, fmt.Errorf("task %q: no service %q", name, svcName)
	}
	return id, fail
}
