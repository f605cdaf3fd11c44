package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/route"
	sm "shoal/statemachine"
	"shoal/wire"
)

// registrar is a cluster seen by one manager opening sessions: the leader
// duties' submitter over a duty.Memory, and a local replica to read,
// which may lag (local: a second Memory; nil: reads see the committed
// state). Every commit is recorded by its kind.
type registrar struct {
	*duty.Submitter
	local   *duty.Memory
	commits []sm.CmdKind
}

var _ Registrar = (*registrar)(nil)

func newRegistrar() (*registrar, *duty.Memory) {
	m := duty.NewMemory(2, clock.NewFake(time.Unix(1_700_000_000, 0)))
	return &registrar{Submitter: duty.NewSubmitter(m, nil)}, m
}

func (r *registrar) ReadLocal(g int, fn func(*sm.State)) error {
	if r.local != nil {
		return r.local.ReadLocal(g, fn)
	}
	return r.Submitter.ReadLocal(g, fn)
}

func (r *registrar) Submit(ctx context.Context, cmd sm.Command) (sm.Result, error) {
	r.commits = append(r.commits, cmd.Kind)
	return r.Submitter.Submit(ctx, cmd)
}

func (r *registrar) SubmitBeforeFanout(ctx context.Context, cmd sm.Command) (sm.Result, error) {
	r.commits = append(r.commits, cmd.Kind)
	return r.Submitter.SubmitBeforeFanout(ctx, cmd)
}

func newNode(key string) *wire.SessionRequest {
	return &wire.SessionRequest{Key: key, Node: wire.NodeDescription{Hostname: "h1", Labels: map[string]string{"zone": "a"},
		CPU: 4000, Memory: 8 << 30, AgentVersion: "v"}}
}

// wantWire checks that err is the *wire.Error with code and message.
func wantWire(t *testing.T, err error, code, msg string, retry time.Duration) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T), want a wire error %s", err, err, code)
	}
	if we.Code != code || we.Message != msg || we.RetryAfter != int64(retry) {
		t.Fatalf("error %+v, want code %s, message %q, retry after %v", we, code, msg, retry)
	}
}

func TestOpenSessionNewNode(t *testing.T) {
	r, m := newRegistrar()
	m.Apply(route.ClusterGroup, sm.Command{Kind: sm.CmdSetManager, Seq: 2, Name: "10.0.0.2:7700"},
		sm.Command{Kind: sm.CmdSetManager, Seq: 1, Name: "10.0.0.1:7700"})
	got, err := OpenSession(context.Background(), r, newNode(""))
	if err != nil {
		t.Fatal(err)
	}
	if got.Node == 0 || got.Nodes != 0 || !slices.Equal(got.Managers, []string{"10.0.0.1:7700", "10.0.0.2:7700"}) {
		t.Fatalf("opened %+v, want a new node, 0 nodes before it, the managers sorted", got)
	}
	if want := []sm.CmdKind{sm.CmdReserveNodeID, sm.CmdUpsertNode}; !slices.Equal(r.commits, want) {
		t.Fatalf("commits %v, want %v", r.commits, want)
	}
	n := m.State(route.ClusterGroup).Node(got.Node)
	if n == nil || n.Name != "h1" || n.Role != sm.RoleWorker || n.Status != sm.NodeReady ||
		n.CPU != 4000 || n.Memory != 8<<30 || n.Labels["zone"] != "a" {
		t.Fatalf("node %+v, want the agent's worker h1, ready", n)
	}
	// A second agent gets another node.
	other, err := OpenSession(context.Background(), r, newNode(""))
	if err != nil || other.Node == got.Node || other.Nodes != 1 {
		t.Fatalf("second new node %+v, %v; want another ID, 1 node before it", other, err)
	}
}

// A first session asked again with the same key (its answer was lost)
// finds the node the first attempt made; another key makes another node.
func TestOpenSessionSameKeyOneNode(t *testing.T) {
	r, m := newRegistrar()
	first, err := OpenSession(context.Background(), r, newNode("k1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := OpenSession(context.Background(), r, newNode("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Node != first.Node {
		t.Fatalf("same key: node %d then %d, want one node", first.Node, again.Node)
	}
	if n := m.State(route.ClusterGroup).NumNodes(); n != 1 {
		t.Fatalf("%d nodes after one key's two sessions, want 1", n)
	}
	other, err := OpenSession(context.Background(), r, newNode("k2"))
	if err != nil || other.Node == first.Node {
		t.Fatalf("another key: %+v, %v; want another node", other, err)
	}
}

func TestOpenSessionKnownNode(t *testing.T) {
	r, m := newRegistrar()
	first, err := OpenSession(context.Background(), r, newNode("k1"))
	if err != nil {
		t.Fatal(err)
	}
	r.commits = nil
	req := newNode("")
	req.NodeID = first.Node
	got, err := OpenSession(context.Background(), r, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Node != first.Node || got.Nodes != 1 || len(r.commits) != 0 {
		t.Fatalf("known node: %+v, commits %v; want node %d, 1 node, nothing committed", got, r.commits, first.Node)
	}
	if n := m.State(route.ClusterGroup).NumNodes(); n != 1 {
		t.Fatalf("%d nodes, want 1", n)
	}
}

// A replica that has not applied the node's creation yet asks for a
// retry; it commits nothing and makes no node.
func TestOpenSessionNodeNotYetApplied(t *testing.T) {
	r, m := newRegistrar()
	first, err := OpenSession(context.Background(), r, newNode("k1"))
	if err != nil {
		t.Fatal(err)
	}
	r.commits = nil
	r.local = duty.NewMemory(2, clock.NewFake(time.Unix(1_700_000_000, 0))) // a replica that lags
	req := newNode("")
	req.NodeID = first.Node
	_, err = OpenSession(context.Background(), r, req)
	wantWire(t, err, wire.CodeUnavailable, "this manager does not know the node yet; retry", 500*time.Millisecond)
	if len(r.commits) != 0 || m.State(route.ClusterGroup).NumNodes() != 1 {
		t.Fatalf("commits %v, %d nodes; want none, 1", r.commits, m.State(route.ClusterGroup).NumNodes())
	}
}

func TestOpenSessionRemovedNode(t *testing.T) {
	r, m := newRegistrar()
	first, err := OpenSession(context.Background(), r, newNode("k1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []sm.Command{{Kind: sm.CmdSetNodeStatus, Node: first.Node, NodeStatus: sm.NodeDown},
		{Kind: sm.CmdRemoveNode, Node: first.Node}} {
		if _, err := r.Submit(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	r.commits = nil
	req := newNode("")
	req.NodeID = first.Node
	_, err = OpenSession(context.Background(), r, req)
	wantWire(t, err, wire.CodeNodeRemoved,
		"this node was removed from the cluster; clear the agent's data directory to join as a new node", 0)
	if len(r.commits) != 0 || m.State(route.ClusterGroup).NumNodes() != 0 {
		t.Fatalf("commits %v, %d nodes; want none, 0", r.commits, m.State(route.ClusterGroup).NumNodes())
	}
}

// A request without a hostname is refused before anything is read or
// committed; so is a key over 48 bytes, before anything is committed.
func TestOpenSessionBadRequest(t *testing.T) {
	r, _ := newRegistrar()
	r.local = nil
	req := newNode("k1")
	req.Node.Hostname = ""
	failing := &failingReads{registrar: r}
	_, err := OpenSession(context.Background(), failing, req)
	wantWire(t, err, wire.CodeBadRequest, "the session request needs the node's hostname", 0)
	if failing.reads != 0 || len(r.commits) != 0 {
		t.Fatalf("%d reads, commits %v; want none", failing.reads, r.commits)
	}
	long := newNode(string(make([]byte, MaxKeyLen+1)))
	_, err = OpenSession(context.Background(), r, long)
	wantWire(t, err, wire.CodeBadRequest, "the session request's key is longer than 48 bytes", 0)
	if len(r.commits) != 0 {
		t.Fatalf("commits %v, want none", r.commits)
	}
	if _, err := OpenSession(context.Background(), r, newNode(string(make([]byte, MaxKeyLen)))); err != nil {
		t.Fatalf("a key of %d bytes: %v", MaxKeyLen, err)
	}
}

// failingReads counts local reads and fails them.
type failingReads struct {
	*registrar
	reads int
}

func (f *failingReads) ReadLocal(int, func(*sm.State)) error {
	f.reads++
	return errors.New("no read")
}

// The cluster's errors come back as they are, and a node whose creation
// failed after its reservation is not reported opened.
func TestOpenSessionClusterErrors(t *testing.T) {
	r, m := newRegistrar()
	failing := &failingReads{registrar: r}
	if _, err := OpenSession(context.Background(), failing, newNode("")); err == nil || err.Error() != "no read" {
		t.Fatalf("read failure: %v, want it returned", err)
	}
	boom := fmt.Errorf("no quorum")
	m.FailSubmissions(func(c sm.Command) error {
		if c.Kind == sm.CmdUpsertNode {
			return boom
		}
		return nil
	})
	got, err := OpenSession(context.Background(), r, newNode("k1"))
	if !errors.Is(err, boom) || got.Node != 0 {
		t.Fatalf("creation failure: %+v, %v; want %v and no node", got, err, boom)
	}
}

// The plan alone, as a table: what each request decides over what it read.
func TestPlanSession(t *testing.T) {
	known := ClusterView{Nodes: 3, Known: true}
	removed := ClusterView{Nodes: 2, Removed: true}
	none := ClusterView{Nodes: 2}
	req := func(id sm.NodeID, key, host string) *wire.SessionRequest {
		return &wire.SessionRequest{NodeID: id, Key: key, Node: wire.NodeDescription{Hostname: host}}
	}
	for _, tc := range []struct {
		name string
		req  *wire.SessionRequest
		view ClusterView
		want string
	}{
		{"known", req(3, "", "h"), known, "known"},
		{"known with key", req(3, "k", "h"), known, "known"},
		{"not yet applied", req(3, "", "h"), none, "unavailable"},
		{"removed", req(3, "", "h"), removed, "node_removed"},
		{"new", req(0, "", "h"), none, `new ""`},
		{"new with key", req(0, "k", "h"), none, `new "node:k"`},
		{"no hostname", req(0, "k", ""), none, "bad_request"},
		{"no hostname, known", req(3, "", ""), known, "bad_request"},
		{"long key", req(0, string(make([]byte, 49)), "h"), none, "bad_request"},
		{"long key, known", req(3, string(make([]byte, 49)), "h"), known, "known"},
	} {
		p, e := PlanSession(tc.req, tc.view)
		var got string
		switch {
		case e != nil:
			got = e.Code
		case p.Admission == AdmitKnown:
			got = "known"
		default:
			if p.Reserve.Kind != sm.CmdReserveNodeID || p.Spec.Hostname != tc.req.Node.Hostname {
				t.Errorf("%s: plan %+v", tc.name, p)
			}
			got = fmt.Sprintf("new %q", p.Reserve.RequestID)
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
