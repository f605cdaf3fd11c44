package api

import (
	"context"
	"fmt"
	"testing"

	"shoal/manager/control"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// statusReplica is a replica whose submitter takes status reports as
// they are (control.StatusSubmitter, as duty.Submitter does), keeping
// the commands they make.
type statusReplica struct {
	*replica
	got []statemachine.Command
}

func (r *statusReplica) SubmitStatuses(_ context.Context, node statemachine.NodeID, n int,
	at func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string)) []routing.Outcome {
	for i := range n {
		task, state, exit, msg := at(i)
		r.got = append(r.got, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: task, Node: node,
			State: state, ExitCode: exit, Message: msg})
	}
	return make([]routing.Outcome, n)
}

// The status endpoint hands a submitter that takes status reports as
// they are the batch's reports so (no command array per batch), in order.
func TestStatusEndpointHandsReportsAsTheyAre(t *testing.T) {
	r := &statusReplica{replica: &replica{st: statemachine.New(statemachine.Config{Group: 1, Groups: 1}), leader: 1}}
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: control.NewFeed(1, nil, 16, 16)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &wire.StatusBatch{NodeID: 5, Reports: []wire.StatusReport{
		{Task: 1<<48 | 1, State: statemachine.StateRunning}, {Task: 1<<48 | 2, State: statemachine.StateFailed, ExitCode: 3, Message: "exit code 3"}}}
	status, got := postAgent(t, s, "/v1/agent/status", b)
	want := &wire.StatusAck{Results: []wire.ReportResult{wire.ReportAccepted, wire.ReportAccepted}, Messages: []string{"", ""}}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("answer %d %+v; want %+v", status, got, want)
	}
	if fmt.Sprintf("%+v", r.got) != fmt.Sprintf("%+v", control.StatusCommands(b)) {
		t.Fatalf("handed as reports %+v, want %+v", r.got, control.StatusCommands(b))
	}
}
