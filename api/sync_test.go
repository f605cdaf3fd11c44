package api

import (
	"context"
	"fmt"
	"testing"

	"shoal/cluster"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// failing is a replica whose commits fail.
type failing struct {
	*replica
	err error
}

func (f failing) SubmitToGroup(context.Context, int, statemachine.Command) (statemachine.Result, error) {
	return statemachine.Result{}, f.err
}

// TestSyncEndpointWiring: the sync endpoint decodes the request, runs the
// fan-out (shoal/manager/control, tested there) on the server's reads and
// group submitter, and encodes its answer or its error.
func TestSyncEndpointWiring(t *testing.T) {
	unknownGroup := statemachine.TaskID(3<<48 | 1) // this cluster has one group
	unknownTask := statemachine.TaskID(1<<48 | 5)
	r := &replica{st: statemachine.New(statemachine.Config{Group: 1, Groups: 1}), leader: 1}
	for _, c := range []struct {
		name    string
		toGroup GroupSubmitter
		seqs    []uint64
		want    wire.Message
	}{
		{name: "answered", toGroup: r,
			want: &wire.SyncAnswer{Destroy: []statemachine.TaskID{unknownGroup, unknownTask}}},
		{name: "commit failed", toGroup: failing{r, fmt.Errorf("group 1: %w", cluster.ErrNotProposed)}, seqs: []uint64{0, 4},
			want: &wire.Error{Code: wire.CodeUnavailable, Message: "the cluster cannot take this right now; retry", RetryAfter: 1e9}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: c.toGroup, Submitter: r,
				Feed: control.NewFeed(1, nil, 16, 16)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			status, got := postAgent(t, s, "/v1/agent/sync", &wire.SyncRequest{NodeID: 5, Seqs: c.seqs, Held: []statemachine.TaskID{unknownTask, unknownGroup}})
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
				t.Errorf("answer %d %+v; want %+v", status, got, c.want)
			}
		})
	}
}
