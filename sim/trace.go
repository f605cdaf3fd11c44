package sim

import (
	"fmt"
	"strings"
	"time"

	"shoal/statemachine"
	"shoal/wire"
)

// traceCall prints one call a manager served, when tracing: the agent,
// the replica with what it had applied of each group when the call came,
// the request and the answer.
func (w *World) traceCall(name string, r int, applied string, req, resp wire.Message, err error, dup bool) {
	if w.trace == nil || (len(w.traceOnly) > 0 && !w.traceOnly[callName(req)]) {
		return
	}
	d := ""
	if dup {
		d = " (duplicate)"
	}
	ans := describe(resp)
	if err != nil {
		ans = "error: " + err.Error()
	}
	after := ""
	if applied == "" {
		applied = "?" // the call came before tracing began
	}
	if now := w.applied(r); now != applied {
		after = " -> " + now
	}
	fmt.Fprintf(w.trace, "%s -> m%d [applied %s%s]%s: %s\n  <- %s\n", name, r+1, applied, after, d, describe(req), ans)
}

// applied prints what replica r applied of each group.
func (w *World) applied(r int) string {
	parts := make([]string, len(w.gs.g))
	for g := range w.gs.g {
		parts[g] = fmt.Sprint(w.gs.g[g].reps[r].LastIndex())
	}
	return strings.Join(parts, " ")
}

// tid prints a task ID readably: its group and its number there.
func tid(id statemachine.TaskID) string {
	return fmt.Sprintf("t%d.%d", uint64(id)>>48, uint64(id)&(1<<48-1))
}

func tids(ids []statemachine.TaskID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = tid(id)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// callName names a request's call as trace's only= option does.
func callName(m wire.Message) string {
	switch m.(type) {
	case *wire.SessionRequest:
		return "session"
	case *wire.Heartbeat:
		return "heartbeat"
	case *wire.AssignmentsRequest:
		return "assignments"
	case *wire.StatusBatch:
		return "status"
	case *wire.SyncRequest:
		return "sync"
	}
	return "?"
}

func describe(m wire.Message) string {
	switch x := m.(type) {
	case nil:
		return "nothing"
	case *wire.SessionRequest:
		return fmt.Sprintf("session node=%d", x.NodeID)
	case *wire.Session:
		return fmt.Sprintf("session node=%d", x.NodeID)
	case *wire.Heartbeat:
		return "heartbeat"
	case *wire.HeartbeatAck:
		return fmt.Sprintf("ack %s period=%s", x.Status, time.Duration(x.Period))
	case *wire.AssignmentsRequest:
		return fmt.Sprintf("assignments cursor=%v", []uint64(x.Cursor))
	case *wire.Assignments:
		kind := "COMPLETE"
		if x.Kind == wire.FrameIncremental {
			kind = "INCREMENTAL"
		}
		if x.Resync {
			kind += " resync"
		}
		var ts []string
		for _, t := range x.Tasks {
			ts = append(ts, fmt.Sprintf("%s:%s/%s", tid(t.Task), t.State, t.Desired))
		}
		var sp []string
		for _, s := range x.Specs {
			sp = append(sp, fmt.Sprintf("%s/v%d", s.Service, s.Version))
		}
		return fmt.Sprintf("%s to %v tasks=[%s] removed=%s specs=[%s] seqs=%v", kind, []uint64(x.ResultsIn),
			strings.Join(ts, " "), tids(x.Removed), strings.Join(sp, " "), x.Seqs)
	case *wire.StatusBatch:
		var rs []string
		for _, r := range x.Reports {
			rs = append(rs, fmt.Sprintf("%s:%s", tid(r.Task), r.State))
		}
		s := "status [" + strings.Join(rs, " ") + "]"
		if x.ReReport {
			s += " re-report held=" + tids(x.Held)
		}
		return s
	case *wire.StatusAck:
		var rs []string
		for i, r := range x.Results {
			s := fmt.Sprint(r)
			if i < len(x.Messages) && x.Messages[i] != "" {
				s += " (" + x.Messages[i] + ")"
			}
			rs = append(rs, s)
		}
		return "ack [" + strings.Join(rs, ", ") + "]"
	case *wire.SyncRequest:
		return fmt.Sprintf("sync seqs=%v held=%s", x.Seqs, tids(x.Held))
	case *wire.SyncAnswer:
		return "destroy " + tids(x.Destroy)
	}
	return fmt.Sprintf("%T", m)
}
