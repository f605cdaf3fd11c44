package control

// The assignment stream's script commands (see script_test.go for the
// world):
//
//	open n1                       a session of n1's agent opens here (the
//	                              stream's record of it; after `session`)
//	poll n1 [from=last|previous|none] [wait=D] [async]
//	                              the agent's long poll from the cursor the
//	                              last answer gave it (last), the one before
//	                              (previous: the last answer was lost), or
//	                              none (a COMPLETE); wait=0 by default
//	                              (answer at once); async: the poll parks,
//	                              and `await n1` prints its answer; a
//	                              second async poll while one is parked is
//	                              the agent asking again after giving up
//	                              on the first, which the manager still
//	                              serves
//	await n1 [lost]               the answer of n1's oldest parked poll;
//	                              lost: the agent never got it (its
//	                              cursors stay), printed once every parked
//	                              poll of n1 answered, without the reads
//	advance D                     the fake clock moves on by D
//	manager N addr=A              replica N registers its API address
//	leader N                      this replica learns that N leads the
//	                              cluster group (0: none)
//	quorum lost|ok                this replica loses (or regains) contact
//	                              with the cluster group's quorum; its
//	                              read barriers fail meanwhile
//	snapshot-restore group=G      this replica restarted from a snapshot of
//	                              group G at its last index: its feed knows
//	                              nothing before it
//	log-notice n1 id=N            a log subscription's notice names n1
//	                              (LogBroker.PutNotice)
//	assign-all web n1             every pending task of web to n1
//	update web cmd=C              a new spec version of web
//
// A poll prints the frame (complete, complete resync, incremental), its
// tasks (name, state, desired, spec version; of more than four, the first
// and the last), removed handles, the specs
// it carries (service@version), the cursor it brings the agent to and the
// node's sequences (per service group), the leader it names, and the
// reads this replica made: "quorum read" is a read barrier.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"shoal/cluster"
	"shoal/route"
	sm "shoal/statemachine"
	"shoal/wire"
)

// scriptAgent is what the scripts remember of one agent: its session, the
// cursor its last answer gave it and the one before, and its parked polls
// (oldest first).
type scriptAgent struct {
	session        uint64
	last, previous wire.Cursor
	parked         []chan pollResult
}

type pollResult struct {
	a   *wire.Assignments
	err error
}

var streamOptions = map[string][]string{
	"open": nil, "poll": {"from", "wait"}, "await": nil, "advance": nil, "manager": {"addr"},
	"leader": nil, "quorum": nil, "snapshot-restore": {"group"}, "assign-all": nil, "update": {"cmd"},
	"log-notice": {"id"}, "local-reads-fail": {"group"},
}

// Leader, LeaderNotice and Contact: the cluster group's leader as this
// replica knows it.

func (w *scriptWorld) Leader(int) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leader, w.leader != 0
}

func (w *scriptWorld) LeaderNotice(int) (uint64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leader, w.notice
}

func (w *scriptWorld) Contact(int) cluster.Contact {
	w.mu.Lock()
	defer w.mu.Unlock()
	return cluster.Contact{OK: !w.noQuorum, LastContact: time.Second}
}

var _ Leaders = (*scriptWorld)(nil)

// runStream runs the stream's commands; ok is false for another command.
func (w *scriptWorld) runStream(d *datadriven.TestData, pos []string, kv map[string]string) (string, bool, error) {
	allowed, ok := streamOptions[d.Cmd]
	if !ok {
		return "", false, nil
	}
	for k := range kv {
		if !contains(allowed, k) {
			return "", true, fmt.Errorf("unknown option %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
	need := func(n int) error {
		if len(pos) != n {
			return fmt.Errorf("want %d positional arguments, got %q", n, pos)
		}
		return nil
	}
	agentOf := func() (*scriptAgent, sm.NodeID, error) {
		if err := need(1); err != nil {
			return nil, 0, err
		}
		n, err := w.node(pos[0])
		if err != nil {
			return nil, 0, err
		}
		a := w.agents[pos[0]]
		if a == nil {
			return nil, 0, fmt.Errorf("%s has no session here (open it first)", pos[0])
		}
		return a, n, nil
	}
	async := false
	if d.Cmd == "poll" && len(pos) > 0 && pos[len(pos)-1] == "async" {
		pos, async = pos[:len(pos)-1], true
	}
	lost := false
	if d.Cmd == "await" && len(pos) > 0 && pos[len(pos)-1] == "lost" {
		pos, lost = pos[:len(pos)-1], true
	}
	switch d.Cmd {
	case "open":
		n, err := w.node(pos[0])
		if err != nil {
			return "", true, err
		}
		a := &scriptAgent{session: uint64(2*len(w.agents) + 1)}
		w.agents[pos[0]] = a
		w.stream.Open(a.session, n)
		return fmt.Sprintf("session %d", a.session), true, nil
	case "poll":
		a, n, err := agentOf()
		if err != nil {
			return "", true, err
		}
		req := &wire.AssignmentsRequest{NodeID: n, SessionID: a.session, Cursor: a.last}
		switch kv["from"] {
		case "", "last":
		case "previous":
			req.Cursor = a.previous
		case "none":
			req.Cursor = nil
		default:
			return "", true, fmt.Errorf("from=%q: want last, previous or none", kv["from"])
		}
		if v, ok := kv["wait"]; ok {
			dur, err := time.ParseDuration(v)
			if err != nil {
				return "", true, err
			}
			req.Wait = int64(dur)
		}
		if async {
			if req.Wait <= 0 {
				return "", true, errors.New("an async poll needs wait=D")
			}
			timers := w.clk.Waiters()
			ch := make(chan pollResult, 1)
			a.parked = append(a.parked, ch)
			if len(a.parked) == 1 {
				w.mu.Lock()
				w.calls = map[int][]string{}
				w.mu.Unlock()
			}
			go func() {
				f, err := w.stream.Assignments(context.Background(), req)
				ch <- pollResult{f, err}
			}()
			// Parked: its timer is set (after it read the leader).
			if err := w.clk.BlockUntil(timers+1, 10*time.Second); err != nil {
				return "", true, err
			}
			return "parked", true, nil
		}
		w.mu.Lock()
		w.calls = map[int][]string{}
		w.mu.Unlock()
		f, err := w.stream.Assignments(context.Background(), req)
		return w.answer(a, f, err), true, nil
	case "await":
		a, _, err := agentOf()
		if err != nil {
			return "", true, err
		}
		if len(a.parked) == 0 {
			return "", true, fmt.Errorf("%s has no parked poll", pos[0])
		}
		got := make([]pollResult, len(a.parked))
		for i, ch := range a.parked {
			if i > 0 && !lost {
				break
			}
			select {
			case got[i] = <-ch:
				ch <- got[i] // kept for its own await
			case <-time.After(10 * time.Second):
				return "", true, errors.New("the parked poll did not answer (still parked)")
			}
		}
		r := <-a.parked[0]
		a.parked = a.parked[1:]
		if lost {
			keep := *a // the agent's cursors stay
			return strings.TrimSuffix(w.frameText(&keep, r.a, r.err), "\n"), true, nil
		}
		return w.answer(a, r.a, r.err), true, nil
	case "local-reads-fail":
		g, err := strconv.Atoi(kv["group"])
		if err != nil {
			return "", true, err
		}
		w.mu.Lock()
		w.localFails = g
		w.mu.Unlock()
		return "ok", true, nil
	case "advance":
		if err := need(1); err != nil {
			return "", true, err
		}
		dur, err := time.ParseDuration(pos[0])
		if err != nil {
			return "", true, err
		}
		w.clk.Advance(dur)
		return "ok", true, nil
	case "manager":
		if err := need(1); err != nil {
			return "", true, err
		}
		id, err := strconv.ParseUint(pos[0], 10, 64)
		if err != nil {
			return "", true, err
		}
		return w.apply(sm.Command{Kind: sm.CmdSetManager, Seq: id, Name: kv["addr"]}), true, nil
	case "leader":
		if err := need(1); err != nil {
			return "", true, err
		}
		id, err := strconv.ParseUint(pos[0], 10, 64)
		if err != nil {
			return "", true, err
		}
		w.mu.Lock()
		w.leader = id
		close(w.notice)
		w.notice = make(chan struct{})
		w.mu.Unlock()
		return "ok", true, nil
	case "quorum":
		if err := need(1); err != nil {
			return "", true, err
		}
		if pos[0] != "lost" && pos[0] != "ok" {
			return "", true, fmt.Errorf("want lost or ok, got %q", pos[0])
		}
		w.mu.Lock()
		w.noQuorum = pos[0] == "lost"
		w.mu.Unlock()
		w.stream.CheckQuorum() // as the API does every QuorumCheck
		return "ok", true, nil
	case "snapshot-restore":
		g, err := strconv.Atoi(kv["group"])
		if err != nil || g < 0 || g > w.Groups() {
			return "", true, fmt.Errorf("want group=0..%d", w.Groups())
		}
		w.feed.Raise(g, w.lead.Index(g))
		return "ok", true, nil
	case "log-notice":
		if err := need(1); err != nil {
			return "", true, err
		}
		n, err := w.node(pos[0])
		if err != nil {
			return "", true, err
		}
		id, err := strconv.ParseUint(kv["id"], 10, 64)
		if err != nil {
			return "", true, fmt.Errorf("want id=N: %v", err)
		}
		notice := Notice{ID: id, Publish: "m1:7700", Nodes: map[sm.NodeID][]sm.TaskID{n: nil}}
		if err := w.stream.logs.PutNotice(notice, w.clk.Now()); err != nil {
			return "", true, err
		}
		return "ok", true, nil
	case "assign-all":
		if err := need(2); err != nil {
			return "", true, err
		}
		n, err := w.node(pos[1])
		if err != nil {
			return "", true, err
		}
		assigned := 0
		for g := 1; g <= w.Groups(); g++ {
			st := w.lead.State(g)
			svc := st.ServiceByName(pos[0])
			if svc == nil {
				continue
			}
			var ids []sm.TaskID
			for _, id := range st.TaskIDs() {
				if t := st.Task(id); t.Service == svc.ID && t.Node == 0 && t.Desired == sm.DesiredRunning {
					ids = append(ids, id)
				}
			}
			for _, id := range ids {
				if out := w.apply(sm.Command{Kind: sm.CmdAssign, Task: id, Node: n}); out != "ok" {
					return out, true, nil
				}
				assigned++
			}
		}
		return fmt.Sprintf("%d assigned", assigned), true, nil
	case "update":
		if err := need(1); err != nil {
			return "", true, err
		}
		for g := 1; g <= w.Groups(); g++ {
			if svc := w.lead.State(g).ServiceByName(pos[0]); svc != nil {
				spec := svc.Spec
				spec.Command = strings.Fields(kv["cmd"])
				return w.apply(sm.Command{Kind: sm.CmdUpdateService, Spec: &spec}), true, nil
			}
		}
		return "", true, fmt.Errorf("no service %q", pos[0])
	}
	return "", true, fmt.Errorf("unknown command %q", d.Cmd)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// answer prints a poll's answer, and the reads and commits made since the
// poll began, and moves the agent's cursors as the agent would.
func (w *scriptWorld) answer(a *scriptAgent, f *wire.Assignments, err error) string {
	var b strings.Builder
	b.WriteString(w.frameText(a, f, err))
	w.mu.Lock()
	for g := route.ClusterGroup; g <= w.Groups(); g++ {
		if c := w.calls[g]; len(c) > 0 {
			fmt.Fprintf(&b, "group %d: %s\n", g, strings.Join(c, ", "))
		}
	}
	w.calls = map[int][]string{}
	w.mu.Unlock()
	return strings.TrimSuffix(b.String(), "\n")
}

// frameText prints a poll's answer (one line each, each ending in a
// newline) and moves the agent's cursors as the agent would.
func (w *scriptWorld) frameText(a *scriptAgent, f *wire.Assignments, err error) string {
	var b strings.Builder
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		fmt.Fprintf(&b, "error %s: %s", we.Code, we.Message)
		if we.Leader != "" {
			fmt.Fprintf(&b, " (leader %s)", we.Leader)
		}
		b.WriteString("\n")
	case err != nil:
		fmt.Fprintf(&b, "error: %v\n", err)
	default:
		switch {
		case f.Kind == wire.FrameComplete && f.Resync:
			b.WriteString("complete resync\n")
		case f.Kind == wire.FrameComplete:
			b.WriteString("complete\n")
		default:
			fmt.Fprintf(&b, "incremental from %s\n", groupsOf(f.AppliesTo))
		}
		var tasks []string
		for _, t := range f.Tasks {
			tasks = append(tasks, fmt.Sprintf("%s %s (desired %s) v%d", w.taskName(t.Task), t.State, t.Desired, t.SpecVersion))
		}
		switch {
		case len(tasks) > 4: // the first and the last
			fmt.Fprintf(&b, "tasks: %d: %s, …, %s\n", len(tasks), tasks[0], tasks[len(tasks)-1])
		case len(tasks) > 0:
			fmt.Fprintf(&b, "tasks: %s\n", strings.Join(tasks, ", "))
		}
		if len(f.Removed) > 0 {
			names := make([]string, len(f.Removed))
			for i, id := range f.Removed {
				names[i] = w.taskName(id)
			}
			fmt.Fprintf(&b, "removed: %s\n", strings.Join(names, ", "))
		}
		if len(f.Specs) > 0 {
			specs := make([]string, len(f.Specs))
			for i, sp := range f.Specs {
				specs[i] = fmt.Sprintf("%s@%d", sp.Service, sp.Version)
				if len(sp.Command) > 0 {
					specs[i] += fmt.Sprintf(" (%s)", strings.Join(sp.Command, " "))
				}
			}
			fmt.Fprintf(&b, "specs: %s\n", strings.Join(specs, ", "))
		}
		fmt.Fprintf(&b, "cursor: %s seqs: %s\n", groupsOf(f.ResultsIn), groupsOf(f.Seqs))
		if f.Leader != "" {
			fmt.Fprintf(&b, "leader: %s\n", f.Leader)
		}
		for _, l := range f.Logs {
			fmt.Fprintf(&b, "log subscription %d (lines to %s)\n", l.ID, l.Publish)
		}
		a.previous, a.last = a.last, f.ResultsIn
	}
	return b.String()
}

// groupsOf prints a per-group vector's service groups: [g1 g2].
func groupsOf(v []uint64) string {
	if len(v) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(v))
	for g := 1; g < len(v); g++ {
		parts = append(parts, strconv.FormatUint(v[g], 10))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
