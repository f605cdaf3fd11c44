package control

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"shoal/cluster"
	"shoal/engine/duty"
	"shoal/route"
	sm "shoal/statemachine"
	"shoal/wire"
)

// TestReportResult is the mapping table from a status command's outcome
// to what the agent does with its report.
func TestReportResult(t *testing.T) {
	for _, c := range []struct {
		name string
		o    route.Outcome
		want wire.ReportResult
		msg  string
	}{
		{name: "applied: accepted", o: route.Outcome{Result: sm.Result{ID: 7}}, want: wire.ReportAccepted},
		{name: "a resend of an older state: accepted, no message",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeLowerRank, Msg: "task 7 is running; cannot go back to starting"}},
			want: wire.ReportAccepted},
		{name: "node not ready: retry with the reason",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeNodeNotReady, Msg: "node 1 is down: heartbeat first, then report"}},
			want: wire.ReportRetry, msg: "node 1 is down: heartbeat first, then report"},
		{name: "entry past its deadline: retry with the reason",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeExpired, Msg: "expired"}},
			want: wire.ReportRetry, msg: "expired"},
		{name: "not applied: retry",
			o:    route.Outcome{Failed: cluster.ErrTimeout},
			want: wire.ReportRetry, msg: "not applied yet; send it again"},
		{name: "not applied, even with a result: retry",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeNotFound, Msg: "x"}, Failed: context.DeadlineExceeded},
			want: wire.ReportRetry, msg: "not applied yet; send it again"},
		{name: "unknown task: rejected with the reason",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeNotFound, Msg: "task 9 does not exist"}},
			want: wire.ReportRejected, msg: "task 9 does not exist"},
		{name: "wrong node: rejected with the reason",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeWrongNode, Msg: "task 7 is on node 2, reported by node 1"}},
			want: wire.ReportRejected, msg: "task 7 is on node 2, reported by node 1"},
		{name: "transition not the agent's: rejected",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeWrongComponent, Msg: "agent may not"}},
			want: wire.ReportRejected, msg: "agent may not"},
		{name: "held at ready: rejected",
			o:    route.Outcome{Result: sm.Result{Code: sm.CodeNotAllowed, Msg: "held"}},
			want: wire.ReportRejected, msg: "held"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, msg := ReportResult(c.o)
			if got != c.want || msg != c.msg {
				t.Errorf("ReportResult = %s %q, want %s %q", got, msg, c.want, c.msg)
			}
		})
	}
}

// TestAnswerMarksReReport: a re-report is marked complete only when no
// report of its batch is to be sent again.
func TestAnswerMarksReReport(t *testing.T) {
	ok := route.Outcome{}
	rejected := route.Outcome{Result: sm.Result{Code: sm.CodeNotFound, Msg: "gone"}}
	retry := route.Outcome{Result: sm.Result{Code: sm.CodeNodeNotReady, Msg: "down"}}
	failed := route.Outcome{Failed: cluster.ErrNotProposed}
	for _, c := range []struct {
		name      string
		outs      []route.Outcome
		reReport  bool
		wantRetry bool
		wantMark  bool
	}{
		{name: "re-report, all accepted", outs: []route.Outcome{ok, ok}, reReport: true, wantMark: true},
		{name: "re-report, accepted and rejected", outs: []route.Outcome{ok, rejected}, reReport: true, wantMark: true},
		{name: "re-report of nothing", reReport: true, wantMark: true},
		{name: "re-report, one to retry", outs: []route.Outcome{ok, retry, ok}, reReport: true, wantRetry: true},
		{name: "re-report, one not applied", outs: []route.Outcome{failed}, reReport: true, wantRetry: true},
		{name: "plain batch, all accepted", outs: []route.Outcome{ok}},
		{name: "plain batch, one to retry", outs: []route.Outcome{retry}, wantRetry: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Answer(c.outs, c.reReport)
			if a.Retry != c.wantRetry || a.MarkReReported != c.wantMark {
				t.Errorf("retry %t mark %t, want retry %t mark %t", a.Retry, a.MarkReReported, c.wantRetry, c.wantMark)
			}
			if len(a.Ack.Results) != len(c.outs) || len(a.Ack.Messages) != len(c.outs) {
				t.Errorf("%d results and %d messages for %d reports", len(a.Ack.Results), len(a.Ack.Messages), len(c.outs))
			}
		})
	}
}

// monitor records the marks; monitoring says whether it runs here.
type monitor struct {
	monitoring bool
	marked     []sm.NodeID
}

func (m *monitor) Monitoring() bool { return m.monitoring }

func (m *monitor) MarkReReported(n sm.NodeID) bool {
	m.marked = append(m.marked, n)
	return true
}

// outcomes is a submitter answering each command with the next outcome
// (applied, once they run out) and recording what it was given.
type outcomes struct {
	outs []route.Outcome
	got  []sm.Command
}

func (o *outcomes) SubmitMany(_ context.Context, cmds []sm.Command) []route.Outcome {
	o.got = append(o.got, cmds...)
	out := make([]route.Outcome, len(cmds))
	for i := range cmds {
		if len(o.outs) > 0 {
			out[i], o.outs = o.outs[0], o.outs[1:]
		}
	}
	return out
}

func TestStatusCommands(t *testing.T) {
	b := &wire.StatusBatch{NodeID: 4, SessionID: 9, Reports: []wire.StatusReport{
		{Task: 7, State: sm.StateRunning, At: 5},
		{Task: 8, State: sm.StateFailed, ExitCode: 2, Message: "oom"}}}
	want := []sm.Command{
		{Kind: sm.CmdTaskStatus, Task: 7, Node: 4, State: sm.StateRunning},
		{Kind: sm.CmdTaskStatus, Task: 8, Node: 4, State: sm.StateFailed, ExitCode: 2, Message: "oom"}}
	if got := StatusCommands(b); !reflect.DeepEqual(got, want) {
		t.Errorf("StatusCommands:\n got %+v\nwant %+v", got, want)
	}
}

// TestSubmitStatus runs a node's reports through duty.Memory: what the
// state machine and the submitter answer becomes the agent's verdicts.
func TestSubmitStatus(t *testing.T) {
	w := newWorld(t)
	m := w.lead
	unknown := handle(w.group, 99)
	failing := handle(w.group, 98)
	m.FailSubmissions(func(c sm.Command) error {
		if c.Task == failing {
			return cluster.ErrTimeout
		}
		return nil
	})
	mon := &monitor{monitoring: true}
	b := &wire.StatusBatch{NodeID: 1, Reports: []wire.StatusReport{
		{Task: w.t1, State: sm.StateRunning},  // as applied: accepted
		{Task: w.t1, State: sm.StateStarting}, // an older state resent: accepted
		{Task: unknown, State: sm.StateRunning},
		{Task: failing, State: sm.StateRunning},
	}}
	ack, err := SubmitStatus(context.Background(), m, mon, b)
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.StatusAck{
		Results:  []wire.ReportResult{wire.ReportAccepted, wire.ReportAccepted, wire.ReportRejected, wire.ReportRetry},
		Messages: []string{"", "", fmt.Sprintf("task %d does not exist", unknown), "not applied yet; send it again"}}
	if !reflect.DeepEqual(ack, want) {
		t.Errorf("ack:\n got %+v\nwant %+v", ack, want)
	}
	if len(mon.marked) != 0 {
		t.Errorf("marked %v: not a re-report", mon.marked)
	}

	// The node went down (its heartbeats stopped): its reports wait for
	// its next session, and a re-report with one to retry is not over.
	m.FailSubmissions(nil)
	submit(t, []*duty.Memory{m}, sm.Command{Kind: sm.CmdSetNodeStatus, Node: 1, NodeStatus: sm.NodeDown})
	b = &wire.StatusBatch{NodeID: 1, ReReport: true, Reports: []wire.StatusReport{{Task: w.t1, State: sm.StateFailed, ExitCode: 1}}}
	ack, err = SubmitStatus(context.Background(), m, mon, b)
	if err != nil {
		t.Fatal(err)
	}
	want = &wire.StatusAck{Results: []wire.ReportResult{wire.ReportRetry},
		Messages: []string{"node 1 is down: heartbeat first, then report"}}
	if !reflect.DeepEqual(ack, want) {
		t.Errorf("ack:\n got %+v\nwant %+v", ack, want)
	}
	if len(mon.marked) != 0 {
		t.Errorf("marked %v with a report to retry", mon.marked)
	}
}

// TestSubmitStatusReReport: the marker reaches the monitor only once no
// report is to be retried, and never on a replica where it does not run.
func TestSubmitStatusReReport(t *testing.T) {
	expired := route.Outcome{Result: sm.Result{Code: sm.CodeExpired, Msg: "expired"}}
	rejected := route.Outcome{Result: sm.Result{Code: sm.CodeWrongNode, Msg: "wrong node"}}
	batch := func(reports int) *wire.StatusBatch {
		b := &wire.StatusBatch{NodeID: 3, ReReport: true}
		for i := range reports {
			b.Reports = append(b.Reports, wire.StatusReport{Task: sm.TaskID(i + 1), State: sm.StateRunning})
		}
		return b
	}

	mon := &monitor{monitoring: true}
	sub := &outcomes{outs: []route.Outcome{{}, expired}}
	ack, err := SubmitStatus(context.Background(), sub, mon, batch(2))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Results[1] != wire.ReportRetry || ack.Messages[1] != "expired" {
		t.Errorf("an expired report: %s %q, want retry \"expired\"", ack.Results[1], ack.Messages[1])
	}
	if len(mon.marked) != 0 {
		t.Errorf("marked %v with an expired report to retry", mon.marked)
	}

	sub = &outcomes{outs: []route.Outcome{{}, rejected}}
	if _, err := SubmitStatus(context.Background(), sub, mon, batch(2)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(mon.marked, []sm.NodeID{3}) {
		t.Errorf("marked %v, want [3]: nothing to retry", mon.marked)
	}

	// Not the leader: nothing submitted, nothing marked.
	away := &monitor{}
	sub = &outcomes{}
	for _, mon := range []ReReports{away, nil} {
		_, err = SubmitStatus(context.Background(), sub, mon, batch(1))
		if !errors.Is(err, cluster.ErrNotMonitoring) {
			t.Errorf("re-report where no monitor runs: %v, want ErrNotMonitoring", err)
		}
	}
	if len(sub.got) != 0 || len(away.marked) != 0 {
		t.Errorf("submitted %v, marked %v on a replica without the monitor", sub.got, away.marked)
	}
	// A plain batch needs no monitor.
	sub = &outcomes{outs: []route.Outcome{{}}}
	b := batch(1)
	b.ReReport = false
	if _, err := SubmitStatus(context.Background(), sub, nil, b); err != nil {
		t.Errorf("plain batch without a monitor: %v", err)
	}
}

// copySubmitter keeps a copy of every batch of commands it is handed.
type copySubmitter struct{ got [][]sm.Command }

func (c *copySubmitter) SubmitMany(_ context.Context, cmds []sm.Command) []route.Outcome {
	c.got = append(c.got, append([]sm.Command(nil), cmds...))
	return make([]route.Outcome, len(cmds))
}

// copyStatuses is a copySubmitter that takes reports as they are
// (StatusSubmitter), building each command as the engine does.
type copyStatuses struct{ copySubmitter }

func (c *copyStatuses) SubmitStatuses(_ context.Context, node sm.NodeID, n int,
	at func(i int) (sm.TaskID, sm.TaskState, int32, string)) []route.Outcome {
	cmds := make([]sm.Command, n)
	for i := range cmds {
		task, state, exit, msg := at(i)
		cmds[i] = sm.Command{Kind: sm.CmdTaskStatus, Task: task, Node: node, State: state, ExitCode: exit, Message: msg}
	}
	c.got = append(c.got, cmds)
	return make([]route.Outcome, n)
}

// Each batch submits exactly its own reports' commands (StatusCommands),
// in order, whatever the batches before it held (longer, shorter, with
// messages), to a submitter of commands and to one of reports.
func TestSubmitStatusCommandsAreTheBatchs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plain, reports := &copySubmitter{}, &copyStatuses{}
		var want [][]sm.Command
		for i := range rapid.IntRange(1, 12).Draw(t, "batches") {
			b := &wire.StatusBatch{NodeID: sm.NodeID(1 + i%3)}
			for range rapid.IntRange(0, 40).Draw(t, "reports") {
				b.Reports = append(b.Reports, wire.StatusReport{
					Task:     sm.TaskID(rapid.Uint64Range(1, 1<<20).Draw(t, "task")),
					State:    sm.TaskState(rapid.IntRange(int(sm.StateAccepted), int(sm.StateFailed)).Draw(t, "state")),
					ExitCode: rapid.Int32Range(-2, 2).Draw(t, "exit"),
					Message:  rapid.SampledFrom([]string{"", "oom", "exit 1"}).Draw(t, "message")})
			}
			for _, sub := range []Submitter{plain, reports} {
				if _, err := SubmitStatus(context.Background(), sub, nil, b); err != nil {
					t.Fatal(err)
				}
			}
			want = append(want, StatusCommands(b))
		}
		for name, got := range map[string][][]sm.Command{"commands": plain.got, "reports": reports.got} {
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) && (len(got[i]) > 0 || len(want[i]) > 0) {
					t.Fatalf("as %s, batch %d submitted\n%+v\nwant\n%+v", name, i, got[i], want[i])
				}
			}
		}
	})
}
