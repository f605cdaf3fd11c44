package control

import (
	"context"
	"fmt"

	"shoal/cluster"
	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Submitter is what status submission needs of the cluster: the
// submitter users' and agents' commands go through (the leader duties'
// submitter over the engine, or duty.Memory in tests). Concurrent
// submissions from many agents share Raft entries: the engine's proposer
// puts everything queued for a group into its next entry (group commit).
// A Submitter that is also a StatusSubmitter (duty.Submitter) is handed
// a batch's reports as they are.
type Submitter interface {
	SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome
}

// ReReports is the node monitor as status submission sees it. The monitor
// runs on the cluster group's leader only: Monitoring reports whether it
// runs on this replica now. MarkReReported records that an initializing
// node re-reported its tasks (it reports false, and changes nothing, for
// a node that is not reconnecting).
type ReReports interface {
	Monitoring() bool
	MarkReReported(node statemachine.NodeID) bool
}

// StatusSubmitter is a Submitter that takes a node's status reports
// without a command per report: the i-th command is CmdTaskStatus from
// node of at(i) (task, state, exit code, message), read once, in order,
// as it is encoded (duty.Submitter, over the engine). SubmitStatus hands
// such a submitter the batch as it is and makes no command array.
type StatusSubmitter interface {
	SubmitStatuses(ctx context.Context, node statemachine.NodeID, n int,
		at func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string)) []route.Outcome
}

// StatusCommands turns a node's status batch into one CmdTaskStatus per
// report, in order, each naming the batch's node (the caller, checked by
// the caller).
func StatusCommands(b *wire.StatusBatch) []statemachine.Command {
	cmds := make([]statemachine.Command, len(b.Reports))
	for i, r := range b.Reports {
		cmds[i] = statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: r.Task, Node: b.NodeID,
			State: r.State, ExitCode: r.ExitCode, Message: r.Message}
	}
	return cmds
}

// submitStatus submits b's reports as StatusCommands: to a
// StatusSubmitter one at a time as it reads them, so nothing of the batch
// is copied, pooled or kept. (A pool of command arrays, one per batch in
// flight, held 26-39 MB per replica at 1M tasks and 10,000 agents: the
// peak of batches in flight times 184 bytes a report.)
func submitStatus(ctx context.Context, sub Submitter, b *wire.StatusBatch) []route.Outcome {
	st, ok := sub.(StatusSubmitter)
	if !ok {
		return sub.SubmitMany(ctx, StatusCommands(b))
	}
	rs := b.Reports
	return st.SubmitStatuses(ctx, b.NodeID, len(rs), func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string) {
		r := &rs[i]
		return r.Task, r.State, r.ExitCode, r.Message
	})
}

// ReportResult maps a status command's outcome to what the agent does
// with the report, and the message it is told.
func ReportResult(o route.Outcome) (wire.ReportResult, string) {
	if o.Failed != nil {
		return wire.ReportRetry, "not applied yet; send it again"
	}
	switch o.Result.Code {
	case statemachine.CodeOK:
		return wire.ReportAccepted, ""
	case statemachine.CodeLowerRank:
		// The manager already has this state or a later one: a resend
		// of something it applied.
		return wire.ReportAccepted, ""
	case statemachine.CodeNodeNotReady, statemachine.CodeExpired:
		// Not applied: the node is reconnecting, or the report's entry
		// reached the log after its deadline.
		return wire.ReportRetry, o.Result.Msg
	}
	return wire.ReportRejected, o.Result.Msg
}

// StatusAnswer is what a status batch's outcomes come to.
type StatusAnswer struct {
	Ack wire.StatusAck
	// Retry: some report is to be sent again.
	Retry bool
	// MarkReReported: the batch ends a re-report and no report is to be
	// sent again, so the node monitor records the node re-reported.
	MarkReReported bool
}

// Answer maps the outcomes of a batch's commands (one per report, in
// order) to the agent's acknowledgement, and decides whether a re-report
// (reReport: the batch's marker) is complete.
func Answer(outs []route.Outcome, reReport bool) StatusAnswer {
	a := StatusAnswer{Ack: wire.StatusAck{Results: make([]wire.ReportResult, len(outs)), Messages: make([]string, len(outs))}}
	for i, o := range outs {
		a.Ack.Results[i], a.Ack.Messages[i] = ReportResult(o)
		a.Retry = a.Retry || a.Ack.Results[i] == wire.ReportRetry
	}
	// A re-report with a report to resend is not over: the agent sends
	// the marker again with the resent reports.
	a.MarkReReported = reReport && !a.Retry
	return a
}

// SubmitStatus submits a node's status batch (b.NodeID is the caller, and
// its reports name only its own tasks: both checked by the caller) and
// returns the agent's acknowledgement. A re-report (b.ReReport) must reach
// the node monitor: on a replica where it does not run, SubmitStatus
// submits nothing and fails with cluster.ErrNotMonitoring. Once every
// report of a re-report is accepted or rejected, the node is marked
// re-reported; a node that is not reconnecting (a fresh session of a
// ready node) has nothing to finish, and the monitor ignores the mark.
func SubmitStatus(ctx context.Context, sub Submitter, mon ReReports, b *wire.StatusBatch) (*wire.StatusAck, error) {
	if b.ReReport && (mon == nil || !mon.Monitoring()) {
		return nil, fmt.Errorf("re-report of node %d: %w", b.NodeID, cluster.ErrNotMonitoring)
	}
	a := Answer(submitStatus(ctx, sub, b), b.ReReport)
	if a.MarkReReported {
		mon.MarkReReported(b.NodeID)
	}
	return &a.Ack, nil
}
