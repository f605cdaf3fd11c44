package api

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/valyala/fasthttp"

	"shoal/statemachine"
	"shoal/wire"
)

// pollView is what an agent holds from the answers to its polls: its
// cursor, its tasks' desired states and the specs it was sent.
type pollView struct {
	cursor  wire.Cursor
	desired map[statemachine.TaskID]statemachine.DesiredState
	specs   map[string]bool // service/version
}

// pollAgent asks s for node's assignments from its view's cursor, in the
// wire dialect or in JSON, and applies the answer as an agent does.
func pollAgent(t *testing.T, s *Server, node statemachine.NodeID, v *pollView, json bool) *wire.Assignments {
	t.Helper()
	req := &wire.AssignmentsRequest{NodeID: node, SessionID: uint64(node), Cursor: v.cursor}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/agent/assignments")
	var body []byte
	var err error
	if json {
		ctx.Request.Header.SetContentType(jsonContentType)
		body, err = wire.EncodeJSON(req)
	} else {
		ctx.Request.Header.SetContentType(wireContentType)
		body, err = wire.Append(nil, req)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx.Request.SetBody(body)
	s.handle(&ctx)
	var got wire.Message
	if json {
		got, err = wire.DecodeJSON(wire.TypeAssignments, ctx.Response.Body())
	} else {
		got, err = wire.Decode(ctx.Response.Body())
	}
	a, ok := got.(*wire.Assignments)
	if err != nil || !ok {
		t.Fatalf("answer %d %q: %v", ctx.Response.StatusCode(), ctx.Response.Body(), err)
	}
	complete := a.Kind == wire.FrameComplete || a.Resync
	if !complete && !slices.Equal(a.AppliesTo, v.cursor) {
		t.Fatalf("node %d: an INCREMENTAL applies to %v; the node is at %v", node, a.AppliesTo, v.cursor)
	}
	if complete {
		clear(v.desired)
	}
	for _, sp := range a.Specs {
		v.specs[fmt.Sprintf("%s/%d", sp.Service, sp.Version)] = true
	}
	for _, as := range a.Tasks {
		if !v.specs[fmt.Sprintf("%s/%d", as.Service, as.SpecVersion)] {
			t.Fatalf("node %d: task %d runs %s version %d, a spec it was never sent", node, as.Task, as.Service, as.SpecVersion)
		}
		v.desired[as.Task] = as.Desired
	}
	for _, id := range a.Removed {
		delete(v.desired, id)
	}
	v.cursor = slices.Clone(a.ResultsIn)
	return a
}

// Polls answered through the handler, two nodes in turn, in both
// dialects, while tasks are placed, started, failed, scaled and moved to
// a new version: each INCREMENTAL applies to the cursor the node's last
// answer gave, and after each answer the node holds exactly the tasks the
// state places on it, in their desired states, with their specs. The
// handler reuses its requests and the stream's frames from answer to
// answer (Release): none may carry another's contents.
func TestAssignmentPollsThroughTheHandler(t *testing.T) {
	w := newEventWorld(t, 1024)
	rng := rand.New(rand.NewPCG(35, 2))
	for n := 1; n <= 2; n++ {
		w.apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: statemachine.NodeID(n),
			Name: fmt.Sprintf("n%d", n), CPU: 1 << 20, Memory: 1 << 40, Status: statemachine.NodeReady}})
	}
	specs := map[string]*statemachine.ServiceSpec{}
	for _, name := range []string{"web", "api", "db"} {
		specs[name] = &statemachine.ServiceSpec{Name: name, Replicas: 6, Command: []string{"/bin/" + name}, Env: []string{"N=" + name}}
		w.apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: specs[name]})
	}
	views := map[statemachine.NodeID]*pollView{}
	for n := statemachine.NodeID(1); n <= 2; n++ {
		views[n] = &pollView{desired: map[statemachine.TaskID]statemachine.DesiredState{}, specs: map[string]bool{}}
	}
	incrementals, changes := 0, 0
	for step := range 300 {
		st := w.r.st
		switch rng.IntN(6) {
		case 0, 1: // place a pending task
			for _, id := range st.TaskIDs() {
				if st.Task(id).Status.State == statemachine.StatePending && !st.Task(id).Desired.Stopping() {
					w.apply(statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: statemachine.NodeID(1 + rng.IntN(2))})
					break
				}
			}
		case 2: // a node reports a task of its own
			ids := st.TaskIDs()
			if len(ids) == 0 {
				break
			}
			tk := st.Task(ids[rng.IntN(len(ids))])
			if tk.Node != 0 && !tk.Status.State.Terminal() {
				state := []statemachine.TaskState{statemachine.StatePreparing, statemachine.StateRunning, statemachine.StateFailed}[rng.IntN(3)]
				w.apply(statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: tk.ID, Node: tk.Node, State: max(state, tk.Status.State)})
			}
		case 3: // a service scales or moves to a new version
			sp := *specs[[]string{"web", "api", "db"}[rng.IntN(3)]]
			if rng.IntN(2) == 0 {
				sp.Replicas = uint32(2 + rng.IntN(8))
			} else {
				sp.Env = append(slices.Clone(sp.Env), fmt.Sprintf("STEP=%d", step))
			}
			specs[sp.Name] = &sp
			w.apply(statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &sp})
		default: // both nodes poll
			for n := statemachine.NodeID(1); n <= 2; n++ {
				v := views[n]
				a := pollAgent(t, w.s, n, v, rng.IntN(3) == 0)
				if a.Kind == wire.FrameIncremental {
					incrementals++
					changes += len(a.Tasks) + len(a.Removed)
				}
				want := map[statemachine.TaskID]statemachine.DesiredState{}
				for _, tk := range st.NodeTasks(n) {
					want[tk.ID] = tk.Desired
				}
				if fmt.Sprint(v.desired) != fmt.Sprint(want) {
					t.Fatalf("step %d: node %d holds %v; the state places %v on it", step, n, v.desired, want)
				}
			}
		}
	}
	t.Logf("%d incremental answers with %d changes", incrementals, changes)
	if incrementals < 50 || changes < 50 {
		t.Fatalf("%d incremental answers with %d changes: the history made too little to check", incrementals, changes)
	}
}
