package wire

import (
	"pgregory.net/rapid"

	"shoal/statemachine"
)

// Generators of random messages for the property tests. Empty slices and
// maps are nil, as the decoders return them, so a decoded message can be
// compared with the one encoded.

func drawSlice[T any](t *rapid.T, label string, max int, draw func(*rapid.T) T) []T {
	n := rapid.IntRange(0, max).Draw(t, label+" len")
	if n == 0 {
		return nil
	}
	s := make([]T, n)
	for i := range s {
		s[i] = draw(t)
	}
	return s
}

var (
	genText = rapid.OneOf(rapid.Just(""), rapid.StringN(0, 24, -1), rapid.SampledFrom([]string{"web", "db", "overlay", "10.0.0.5/24", "é✓"}))
	genU64  = rapid.OneOf(rapid.Uint64Range(0, 300), rapid.Uint64())
	genI64  = rapid.OneOf(rapid.Int64Range(-300, 300), rapid.Int64())
)

func drawText(t *rapid.T) string              { return genText.Draw(t, "text") }
func drawU64(t *rapid.T) uint64               { return genU64.Draw(t, "u64") }
func drawI64(t *rapid.T) int64                { return genI64.Draw(t, "i64") }
func drawTask(t *rapid.T) statemachine.TaskID { return statemachine.TaskID(drawU64(t)) }
func drawNode(t *rapid.T) statemachine.NodeID {
	return statemachine.NodeID(rapid.Uint32().Draw(t, "node"))
}
func drawCursor(t *rapid.T) Cursor { return Cursor(drawSlice(t, "cursor", 5, drawU64)) }
func drawState(t *rapid.T) statemachine.TaskState {
	return statemachine.TaskState(rapid.IntRange(0, len(taskStateNames)-1).Draw(t, "state"))
}

func drawSpec(t *rapid.T) Spec {
	return Spec{Service: drawText(t), Version: rapid.Uint32().Draw(t, "version"),
		Command: drawSlice(t, "command", 3, drawText), Env: drawSlice(t, "env", 3, drawText),
		Dir: drawText(t), StopGrace: drawI64(t)}
}

func drawAssignment(t *rapid.T) Assignment {
	return Assignment{Task: drawTask(t), Service: drawText(t), Slot: rapid.Uint32().Draw(t, "slot"),
		SpecVersion: rapid.Uint32().Draw(t, "spec version"),
		Desired:     statemachine.DesiredState(rapid.IntRange(0, len(desiredNames)-1).Draw(t, "desired")),
		State:       drawState(t),
		Addresses: drawSlice(t, "addresses", 3, func(t *rapid.T) Address {
			return Address{Network: drawText(t), Addr: drawText(t)}
		})}
}

func drawReport(t *rapid.T) StatusReport {
	return StatusReport{Task: drawTask(t), State: drawState(t), ExitCode: rapid.Int32().Draw(t, "exit"),
		Message: drawText(t), At: drawI64(t)}
}

func drawLogSubscription(t *rapid.T) LogSubscription {
	return LogSubscription{ID: drawU64(t), Publish: drawText(t), Tasks: drawSlice(t, "tasks", 3, drawTask),
		Follow: rapid.Bool().Draw(t, "follow"), Tail: drawI64(t), Since: drawI64(t)}
}

// drawMessage draws a random message of type typ.
func drawMessage(t *rapid.T, typ MsgType) Message {
	switch typ {
	case TypeError:
		return &Error{Code: drawText(t), Message: drawText(t), RetryAfter: drawI64(t), Leader: drawText(t)}
	case TypeSessionRequest:
		var labels map[string]string
		for _, k := range drawSlice(t, "labels", 3, drawText) {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = drawText(t)
		}
		return &SessionRequest{NodeID: drawNode(t), Node: NodeDescription{Hostname: drawText(t), Labels: labels,
			CPU: drawI64(t), Memory: drawI64(t), AgentVersion: drawText(t)}}
	case TypeSession:
		return &Session{NodeID: drawNode(t), SessionID: drawU64(t), HeartbeatPeriod: drawI64(t), SyncInterval: drawI64(t),
			Managers: drawSlice(t, "managers", 3, drawText), Groups: rapid.Uint16().Draw(t, "groups")}
	case TypeHeartbeat:
		return &Heartbeat{NodeID: drawNode(t), SessionID: drawU64(t)}
	case TypeHeartbeatAck:
		return &HeartbeatAck{Period: drawI64(t),
			Status: statemachine.NodeStatus(rapid.IntRange(0, len(nodeStatusNames)-1).Draw(t, "status"))}
	case TypeAssignmentsRequest:
		return &AssignmentsRequest{NodeID: drawNode(t), SessionID: drawU64(t), Cursor: drawCursor(t), Wait: drawI64(t)}
	case TypeAssignments:
		kind := rapid.SampledFrom([]FrameKind{FrameComplete, FrameIncremental}).Draw(t, "kind")
		var logs []LogSubscription
		if kind == FrameIncremental {
			logs = drawSlice(t, "logs", 2, drawLogSubscription)
		}
		return &Assignments{Logs: logs, Kind: kind,
			Resync: rapid.Bool().Draw(t, "resync"), Last: rapid.Bool().Draw(t, "last"),
			AppliesTo: drawCursor(t), ResultsIn: drawCursor(t), Seqs: drawSlice(t, "seqs", 4, drawU64),
			Specs: drawSlice(t, "specs", 3, drawSpec), Tasks: drawSlice(t, "tasks", 6, drawAssignment),
			Removed: drawSlice(t, "removed", 4, drawTask),
			Leader:  rapid.SampledFrom([]string{"", "10.0.0.2:7946", drawText(t)}).Draw(t, "leader")}
	case TypeStatusBatch:
		return &StatusBatch{NodeID: drawNode(t), SessionID: drawU64(t), Reports: drawSlice(t, "reports", 6, drawReport),
			ReReport: rapid.Bool().Draw(t, "rereport"), Held: drawSlice(t, "held", 4, drawTask)}
	case TypeStatusAck:
		results := drawSlice(t, "results", 5, func(t *rapid.T) ReportResult {
			return ReportResult(rapid.IntRange(0, int(numReportResults)-1).Draw(t, "result"))
		})
		var msgs []string
		if len(results) > 0 && rapid.Bool().Draw(t, "with messages") {
			msgs = make([]string, len(results))
			for i := range msgs {
				msgs[i] = drawText(t)
			}
		}
		return &StatusAck{Results: results, Messages: msgs}
	case TypeSyncRequest:
		return &SyncRequest{NodeID: drawNode(t), SessionID: drawU64(t), Seqs: drawSlice(t, "seqs", 4, drawU64),
			Held: drawSlice(t, "held", 5, drawTask)}
	case TypeSyncAnswer:
		return &SyncAnswer{Destroy: drawSlice(t, "destroy", 5, drawTask)}
	case TypeLogBatch:
		return &LogBatch{NodeID: drawNode(t), Sub: drawU64(t), Lines: drawSlice(t, "lines", 4, func(t *rapid.T) LogLine {
			return LogLine{Task: drawTask(t), Stream: rapid.SampledFrom([]LogStream{LogStdout, LogStderr, LogNote}).Draw(t, "stream"),
				At: drawI64(t), Data: drawText(t)}
		}), Done: rapid.Bool().Draw(t, "done")}
	case TypeLogAck:
		return &LogAck{Stop: rapid.Bool().Draw(t, "stop")}
	}
	panic("unknown type " + typ.String())
}

var genMessage = rapid.Custom(func(t *rapid.T) Message {
	return drawMessage(t, MsgType(rapid.IntRange(int(TypeError), int(numMsgTypes)-1).Draw(t, "type")))
})
