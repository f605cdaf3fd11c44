package wire

import (
	"encoding/binary"
	"slices"
	"strings"
	"unicode/utf8"

	"shoal/internal/varint"
	"shoal/statemachine"
)

// The payload encoding (version 1). Every message is its fields in
// declaration order: unsigned integers and IDs as uvarints, signed ones as
// zigzag varints, enums and booleans as one uvarint, strings as a uvarint
// length and UTF-8 bytes, slices as a uvarint count and their elements, maps
// as a count and key-sorted pairs, cursors as a count and uvarints. Every
// struct nested in a message (an element of a list, NodeDescription) is
// prefixed with its byte length. A reader takes fields it does not know of
// at the end of a message or element as a newer sender's additions and skips
// them; fields missing at the end take zero values.

// appendPayload appends m's payload. It fails only on enum values the
// protocol has no name for.
func appendPayload(b []byte, m Message) ([]byte, error) {
	switch m := m.(type) {
	case *Error:
		b = appendString(b, m.Code)
		b = appendString(b, m.Message)
		b = binary.AppendVarint(b, m.RetryAfter)
		b = appendString(b, m.Leader)
	case *SessionRequest:
		b = binary.AppendUvarint(b, uint64(m.NodeID))
		e := len(b)
		b = beginElem(b)
		b = appendString(b, m.Node.Hostname)
		b = appendLabels(b, m.Node.Labels)
		b = binary.AppendVarint(b, m.Node.CPU)
		b = binary.AppendVarint(b, m.Node.Memory)
		b = appendString(b, m.Node.AgentVersion)
		b = endElem(b, e)
		b = appendString(b, m.Key)
	case *Session:
		b = binary.AppendUvarint(b, uint64(m.NodeID))
		b = binary.AppendUvarint(b, m.SessionID)
		b = binary.AppendVarint(b, m.HeartbeatPeriod)
		b = binary.AppendVarint(b, m.SyncInterval)
		b = appendStrings(b, m.Managers)
		b = binary.AppendUvarint(b, uint64(m.Groups))
	case *Heartbeat:
		b = binary.AppendUvarint(b, uint64(m.NodeID))
		b = binary.AppendUvarint(b, m.SessionID)
	case *HeartbeatAck:
		if !validNodeStatus(m.Status) {
			return b, errorf(ErrMalformed, "heartbeat_ack: node status %d has no name", m.Status)
		}
		b = binary.AppendVarint(b, m.Period)
		b = binary.AppendUvarint(b, uint64(m.Status))
	case *AssignmentsRequest:
		b = binary.AppendUvarint(b, uint64(m.NodeID))
		b = binary.AppendUvarint(b, m.SessionID)
		b = appendUvarints(b, m.Cursor)
		b = binary.AppendVarint(b, m.Wait)
	case *Assignments:
		return appendAssignments(b, m)
	case *StatusBatch:
		b = binary.AppendUvarint(b, uint64(m.NodeID))
		b = binary.AppendUvarint(b, m.SessionID)
		b = binary.AppendUvarint(b, uint64(len(m.Reports)))
		for i := range m.Reports {
			r := &m.Reports[i]
			if !r.State.Valid() {
				return b, errorf(ErrMalformed, "status_batch: report %d: task state %d has no name", i, r.State)
			}
			b = appendReport(b, r)
		}
		b = appendBool(b, m.ReReport)
		b = appendTaskIDs(b, m.Held)
	case *StatusAck:
		if len(m.Messages) != 0 && len(m.Messages) != len(m.Results) {
			return b, errorf(ErrMalformed, "status_ack: %d messages for %d results (want as many, or none)", len(m.Messages), len(m.Results))
		}
		b = binary.AppendUvarint(b, uint64(len(m.Results)))
		for i, r := range m.Results {
			if r >= numReportResults {
				return b, errorf(ErrMalformed, "status_ack: result %d: %d has no name", i, r)
			}
			b = append(b, byte(r))
		}
		b = appendStrings(b, m.Messages)
	case *SyncRequest:
		b = binary.AppendUvarint(b, uint64(m.NodeID))
		b = binary.AppendUvarint(b, m.SessionID)
		b = appendUvarints(b, m.Seqs)
		b = appendTaskIDs(b, m.Held)
	case *SyncAnswer:
		b = appendTaskIDs(b, m.Destroy)
	case *LogBatch:
		return appendLogBatch(b, m)
	case *LogAck:
		b = appendBool(b, m.Stop)
	default:
		return b, errorf(ErrType, "%T is not a wire message", m)
	}
	return b, nil
}

func appendAssignments(b []byte, m *Assignments) ([]byte, error) {
	if m.Kind != FrameComplete && m.Kind != FrameIncremental {
		return b, errorf(ErrMalformed, "assignments: frame kind %d has no name", m.Kind)
	}
	for i := range m.Tasks {
		t := &m.Tasks[i]
		if !validDesired(t.Desired) || !t.State.Valid() {
			return b, errorf(ErrMalformed, "assignments: task %d: desired %d or state %d has no name", t.Task, t.Desired, t.State)
		}
	}
	b = append(b, byte(m.Kind))
	b = append(b, assignmentFlags(m))
	b = appendUvarints(b, m.AppliesTo)
	b = appendUvarints(b, m.ResultsIn)
	b = appendUvarints(b, m.Seqs)
	b = binary.AppendUvarint(b, uint64(len(m.Specs)))
	for i := range m.Specs {
		b = appendSpec(b, &m.Specs[i])
	}
	b = binary.AppendUvarint(b, uint64(len(m.Tasks)))
	for i := range m.Tasks {
		b = appendAssignment(b, &m.Tasks[i])
	}
	b = appendTaskIDs(b, m.Removed)
	b = appendString(b, m.Leader) // added last: older readers skip it
	b = appendLogSubscriptions(b, m.Logs)
	return b, nil
}

// Assignments flag bits.
const (
	flagResync = 1 << 0
	flagLast   = 1 << 1
)

func assignmentFlags(m *Assignments) byte {
	var f byte
	if m.Resync {
		f |= flagResync
	}
	if m.Last {
		f |= flagLast
	}
	return f
}

func appendSpec(b []byte, s *Spec) []byte {
	e := len(b)
	b = beginElem(b)
	b = appendString(b, s.Service)
	b = binary.AppendUvarint(b, uint64(s.Version))
	b = appendStrings(b, s.Command)
	b = appendStrings(b, s.Env)
	b = appendString(b, s.Dir)
	b = binary.AppendVarint(b, s.StopGrace)
	return endElem(b, e)
}

// appendAssignment appends one task; its enums were checked by the caller.
func appendAssignment(b []byte, a *Assignment) []byte {
	e := len(b)
	b = beginElem(b)
	b = binary.AppendUvarint(b, uint64(a.Task))
	b = appendString(b, a.Service)
	b = binary.AppendUvarint(b, uint64(a.Slot))
	b = binary.AppendUvarint(b, uint64(a.SpecVersion))
	b = append(b, byte(a.Desired), byte(a.State))
	b = binary.AppendUvarint(b, uint64(len(a.Addresses)))
	for i := range a.Addresses {
		ad := &a.Addresses[i]
		f := len(b)
		b = beginElem(b)
		b = appendString(b, ad.Network)
		b = appendString(b, ad.Addr)
		b = endElem(b, f)
	}
	return endElem(b, e)
}

// appendReport appends one status report; its state was checked by the caller.
func appendReport(b []byte, r *StatusReport) []byte {
	e := len(b)
	b = beginElem(b)
	b = binary.AppendUvarint(b, uint64(r.Task))
	b = append(b, byte(r.State))
	b = binary.AppendVarint(b, int64(r.ExitCode))
	b = appendString(b, r.Message)
	b = binary.AppendVarint(b, r.At)
	return endElem(b, e)
}

// beginElem reserves the one-byte length prefix of a nested struct that
// starts at len(b); endElem fills it in, widening it for long elements.
func beginElem(b []byte) []byte { return append(b, 0) }

func endElem(b []byte, start int) []byte {
	n := len(b) - start - 1
	if n < 0x80 {
		b[start] = byte(n)
		return b
	}
	w := varint.UvarintLen(uint64(n))
	b = append(b, make([]byte, w-1)...)
	copy(b[start+w:], b[start+1:start+1+n])
	binary.PutUvarint(b[start:start+w], uint64(n))
	return b
}

// appendString appends a length-prefixed string. Invalid UTF-8 (an exit
// message copied from a process, say) is replaced by U+FFFD so that every
// frame Append writes also decodes.
func appendString(b []byte, s string) []byte {
	if !isASCII(s) && !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// isASCII reports whether s is ASCII, eight bytes at a time: the protocol's
// names and addresses are, and this is cheaper than the full UTF-8 check
// that the rest (an exit message, an argument) still gets.
func isASCII(s string) bool {
	var hi uint64
	for ; len(s) >= 8; s = s[8:] {
		hi |= uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	}
	for i := 0; i < len(s); i++ {
		hi |= uint64(s[i])
	}
	return hi&0x8080808080808080 == 0
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendUvarints[T ~uint64](b []byte, vs []T) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return b
}

func appendTaskIDs(b []byte, ids []statemachine.TaskID) []byte { return appendUvarints(b, ids) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendLabels appends a map as key-sorted pairs, so equal maps encode equal.
func appendLabels(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}
