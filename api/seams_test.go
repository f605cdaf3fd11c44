package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/cluster"
	"shoal/manager/control"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// replica is the cluster as the API's narrow interfaces see it, on one
// state and no Raft: the handlers run without an engine.
type replica struct {
	st     *statemachine.State
	leader uint64 // the cluster group's leader; this replica is 1
}

func (r *replica) ReadLocal(_ int, fn func(*statemachine.State)) error { fn(r.st); return nil }
func (r *replica) Read(_ context.Context, _ int, fn func(*statemachine.State)) error {
	fn(r.st)
	return nil
}
func (r *replica) Groups() int               { return 1 }
func (r *replica) GroupOfService(string) int { return 1 }
func (r *replica) Leader(int) (uint64, bool) { return r.leader, r.leader != 0 }
func (r *replica) Contact(int) cluster.Contact {
	return cluster.Contact{Leading: r.leader == 1, OK: true}
}
func (r *replica) ReplicaID() uint64                  { return 1 }
func (r *replica) Leading() bool                      { return r.leader == 1 }
func (r *replica) ClusterLeader() (uint64, time.Time) { return r.leader, time.Time{} }
func (r *replica) LeaderNotice(int) (uint64, <-chan struct{}) {
	return r.leader, nil
}
func (r *replica) Membership() []cluster.GroupMembers               { return nil }
func (r *replica) AddReplica(context.Context, uint64, string) error { return nil }
func (r *replica) RemoveReplica(context.Context, uint64) error      { return nil }
func (r *replica) Proposed(int) (uint64, uint64)                    { return 0, 0 }
func (r *replica) LeaderChanges(int) (uint64, uint64)               { return 0, 0 }
func (r *replica) SubmitToGroup(context.Context, int, statemachine.Command) (statemachine.Result, error) {
	return statemachine.Result{}, nil
}
func (r *replica) Submit(context.Context, statemachine.Command) (statemachine.Result, error) {
	return statemachine.Result{}, nil
}
func (r *replica) SubmitBeforeFanout(context.Context, statemachine.Command) (statemachine.Result, error) {
	return statemachine.Result{}, nil
}
func (r *replica) SubmitMany(_ context.Context, cmds []statemachine.Command) []routing.Outcome {
	return make([]routing.Outcome, len(cmds))
}

// beats is a node monitor that answers every heartbeat alike.
type beats struct {
	ttl time.Duration
	err error
}

func (b beats) Heartbeat(context.Context, statemachine.NodeID, time.Time) (time.Duration, error) {
	return b.ttl, b.err
}
func (b beats) Period(int) time.Duration { return time.Second }
func (b beats) NodeStatus(statemachine.NodeID) (statemachine.NodeStatus, bool) {
	return statemachine.NodeReady, true
}
func (b beats) MarkReReported(statemachine.NodeID) bool { return false }
func (b beats) Timers() (time.Duration, time.Duration)  { return 0, 0 }

// TestHeartbeatAnswers runs the heartbeat endpoint on the narrow
// interfaces alone (no engine, no Raft): an ack, a refusal of the agent
// protocol sent as it is, a cluster error through the error table. (The
// protocol's answers are control's TestHeartbeatAnswers.)
func TestHeartbeatAnswers(t *testing.T) {
	st := statemachine.New(statemachine.Config{})
	for _, c := range []struct {
		name   string
		leader uint64
		node   statemachine.NodeID
		mon    beats
		// relay: the follower relays (NoRelay false); the relay's
		// own tests are control's TestRelay* and manager's
		// TestHeartbeatRelayed*.
		relay bool
		want  wire.Message
	}{
		{name: "ack", leader: 1, node: 5, mon: beats{ttl: 3 * time.Second},
			want: &wire.HeartbeatAck{Period: int64(3 * time.Second), Status: statemachine.NodeReady}},
		{name: "not the leader", leader: 2, node: 5, mon: beats{err: fmt.Errorf("node 5: %w", cluster.ErrNotMonitoring)},
			want: &wire.Error{Code: wire.CodeNotLeader, RetryAfter: int64(200 * time.Millisecond),
				Message: "this manager does not lead the cluster; send heartbeats to the leader"}},
		{name: "no leader address to relay to", leader: 2, node: 5, mon: beats{err: fmt.Errorf("node 5: %w", cluster.ErrNotMonitoring)},
			relay: true, want: &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(500 * time.Millisecond),
				Message: "this manager does not know the cluster's leader right now; retry"}},
		{name: "no quorum", leader: 1, node: 5, mon: beats{err: fmt.Errorf("node 5 down: %w", cluster.ErrNotProposed)},
			want: &wire.Error{Code: wire.CodeUnavailable, Message: "the cluster cannot take this right now; retry", RetryAfter: int64(time.Second)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &replica{st: st, leader: c.leader}
			s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
				Feed: control.NewFeed(1, nil, 16, 16), Monitor: c.mon, NoRelay: !c.relay})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			status, got := postAgent(t, s, "/v1/agent/heartbeat", &wire.Heartbeat{NodeID: c.node})
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
				t.Errorf("answer %d %+v; want %+v", status, got, c.want)
			}
		})
	}
}

// postAgent sends msg as a wire frame to an agent endpoint of s and
// decodes the answer.
func postAgent(t *testing.T, s *Server, path string, msg wire.Message) (int, wire.Message) {
	t.Helper()
	body, err := wire.Append(nil, msg)
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(path)
	ctx.Request.Header.SetContentType(wireContentType)
	ctx.Request.SetBody(body)
	s.handle(&ctx)
	got, err := wire.Decode(ctx.Response.Body())
	if err != nil {
		t.Fatalf("answer %d %q: %v", ctx.Response.StatusCode(), ctx.Response.Body(), err)
	}
	return ctx.Response.StatusCode(), got
}
