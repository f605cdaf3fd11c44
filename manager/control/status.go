package control

import (
	"context"
	"fmt"
	"sync"

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

// StatusCommands turns a node's status batch into one CmdTaskStatus per
// report, in order, each naming the batch's node (the caller, checked by
// the caller).
func StatusCommands(b *wire.StatusBatch) []statemachine.Command {
	return appendStatusCommands(make([]statemachine.Command, 0, len(b.Reports)), b)
}

func appendStatusCommands(cmds []statemachine.Command, b *wire.StatusBatch) []statemachine.Command {
	for _, r := range b.Reports {
		cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: r.Task, Node: b.NodeID,
			State: r.State, ExitCode: r.ExitCode, Message: r.Message})
	}
	return cmds
}

// statusCmds holds status batches' command arrays (*[]Command, cleared)
// between submissions: a submitter keeps nothing of the commands it was
// handed once it returns (the engine encodes them as it takes them), and
// a 184-byte command per report was a third of what a replica allocated
// on its agents' status calls in a 1M ramp.
var statusCmds sync.Pool

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
	buf, _ := statusCmds.Get().(*[]statemachine.Command)
	if buf == nil {
		buf = new([]statemachine.Command)
	}
	cmds := appendStatusCommands((*buf)[:0], b)
	a := Answer(sub.SubmitMany(ctx, cmds), b.ReReport)
	clear(cmds) // pins no message
	*buf = cmds[:0]
	statusCmds.Put(buf)
	if a.MarkReReported {
		mon.MarkReReported(b.NodeID)
	}
	return &a.Ack, nil
}
