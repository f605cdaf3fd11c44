package control

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	sm "shoal/statemachine"
	"shoal/wire"
)

func handle(group int, n uint64) sm.TaskID { return sm.TaskID(uint64(group)<<48 | n) }

func TestPlanSync(t *testing.T) {
	for _, c := range []struct {
		name   string
		req    wire.SyncRequest
		groups int
		want   SyncPlan
	}{
		{name: "nothing held, no sequence: no group visited", groups: 2,
			req: wire.SyncRequest{NodeID: 1}},
		{name: "handles no group made are destroyed at once", groups: 2,
			req: wire.SyncRequest{NodeID: 1, Held: []sm.TaskID{handle(0, 7), handle(3, 1), handle(1, 2)}},
			want: SyncPlan{Destroy: []sm.TaskID{handle(0, 7), handle(3, 1)},
				Visits: []GroupSync{{Group: 1, Held: []sm.TaskID{handle(1, 2)}}}}},
		{name: "handles split by group, a sequence alone visits its group", groups: 3,
			req: wire.SyncRequest{NodeID: 1, Seqs: []uint64{9, 0, 4, 5},
				Held: []sm.TaskID{handle(3, 1), handle(1, 1), handle(3, 2)}},
			want: SyncPlan{Visits: []GroupSync{
				{Group: 1, Held: []sm.TaskID{handle(1, 1)}},
				{Group: 2, Seq: 4},
				{Group: 3, Seq: 5, Held: []sm.TaskID{handle(3, 1), handle(3, 2)}}}}},
		{name: "sequences past the cluster's groups are ignored", groups: 1,
			req:  wire.SyncRequest{NodeID: 1, Seqs: []uint64{0, 2, 3}},
			want: SyncPlan{Visits: []GroupSync{{Group: 1, Seq: 2}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PlanSync(&c.req, c.groups); !reflect.DeepEqual(got, c.want) {
				t.Errorf("PlanSync:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestNext is the per-group decision table: what the fan-out does after
// each step, by what the step saw.
func TestNext(t *testing.T) {
	if s := (GroupSync{Seq: 3}).First(); s != TryLocal {
		t.Errorf("with a sequence the first step is %s, want try-local", s)
	}
	if s := (GroupSync{Held: []sm.TaskID{1}}).First(); s != AnswerQuorum {
		t.Errorf("without a sequence the first step is %s, want answer-quorum: a lagging replica must not answer", s)
	}
	other := errors.New("no quorum")
	for _, c := range []struct {
		step    Step
		current bool
		err     error
		want    Step
	}{
		{TryLocal, true, nil, Done},      // the local replica answers, nothing is committed
		{TryLocal, false, nil, Commit},   // something to confirm, or the replica lags the agent
		{TryLocal, true, other, Commit},  // no local state: commit
		{TryLocal, false, other, Commit}, //
		{Commit, false, nil, AnswerLocal},
		{Commit, false, fmt.Errorf("x: %w", sm.ErrInvalid), AnswerQuorum},  // a sequence past the newest
		{Commit, false, fmt.Errorf("x: %w", sm.ErrNotFound), AnswerQuorum}, // the node is unknown here
		{Commit, false, sm.ErrNodeNotReady, Done},                          // the agent retries
		{Commit, false, context.DeadlineExceeded, Done},
		{Commit, false, other, Done},
		{AnswerLocal, false, nil, Done},
		{AnswerLocal, false, other, Done},
		{AnswerQuorum, false, nil, Done},
		{AnswerQuorum, false, other, Done},
	} {
		if got := Next(c.step, c.current, c.err); got != c.want {
			t.Errorf("Next(%s, current=%v, %v) = %s, want %s", c.step, c.current, c.err, got, c.want)
		}
	}
}
