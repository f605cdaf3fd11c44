package wire

import (
	"fmt"
	"strings"

	"shoal/statemachine"
)

// Enum names. The state machine's enums print their lowercase names with
// String() and an unknown value as "Type(n)"; wire counts the named values
// once and parses names against them, so JSON and the binary codec accept
// exactly the values that have names.

// named returns the names of the values 0, 1, ... of an enum up to the first
// value String prints as unknown.
func named(str func(uint8) string) []string {
	var names []string
	for v := 0; v < 256; v++ {
		s := str(uint8(v))
		if strings.ContainsRune(s, '(') {
			break
		}
		names = append(names, s)
	}
	return names
}

var (
	taskStateNames   = named(func(v uint8) string { return statemachine.TaskState(v).String() })
	desiredNames     = named(func(v uint8) string { return statemachine.DesiredState(v).String() })
	nodeStatusNames  = named(func(v uint8) string { return statemachine.NodeStatus(v).String() })
	frameKindNames   = []string{1: "complete", 2: "incremental"}
	reportResultList = reportResultNames[:]
)

func validDesired(d statemachine.DesiredState) bool  { return int(d) < len(desiredNames) }
func validNodeStatus(s statemachine.NodeStatus) bool { return int(s) < len(nodeStatusNames) }

// parseName returns the index of name in names; what is the enum's name for
// error messages.
func parseName(names []string, what, name string) (uint8, error) {
	for i, n := range names {
		if n == name && n != "" {
			return uint8(i), nil
		}
	}
	return 0, errorf(ErrMalformed, "%q is not a %s (want one of %s)", name, what, strings.Join(nonEmpty(names), ", "))
}

func nonEmpty(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ParseMsgType parses a message type name as printed by String.
func ParseMsgType(name string) (MsgType, error) {
	v, err := parseName(msgTypeNames[:], "message type", name)
	if err != nil {
		return 0, errorf(ErrType, "%s", err.(*detailed).detail)
	}
	return MsgType(v), nil
}

// ParseFrameKind parses "complete" or "incremental".
func ParseFrameKind(name string) (FrameKind, error) {
	v, err := parseName(frameKindNames, "frame kind", name)
	return FrameKind(v), err
}

// ParseReportResult parses "accepted", "retry" or "rejected".
func ParseReportResult(name string) (ReportResult, error) {
	v, err := parseName(reportResultList, "report result", name)
	return ReportResult(v), err
}

// ParseDesiredState parses a desired state name as printed by String.
func ParseDesiredState(name string) (statemachine.DesiredState, error) {
	v, err := parseName(desiredNames, "desired state", name)
	return statemachine.DesiredState(v), err
}

// ParseNodeStatus parses a node status name as printed by String.
func ParseNodeStatus(name string) (statemachine.NodeStatus, error) {
	v, err := parseName(nodeStatusNames, "node status", name)
	return statemachine.NodeStatus(v), err
}

// ParseTaskState parses a task state name as printed by String.
func ParseTaskState(name string) (statemachine.TaskState, error) {
	v, err := parseName(taskStateNames, "task state", name)
	return statemachine.TaskState(v), err
}

// MarshalText and UnmarshalText give wire's own enums their names in JSON.

func (t MsgType) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w: message type %d has no name", ErrType, uint8(t))
	}
	return []byte(t.String()), nil
}

func (t *MsgType) UnmarshalText(b []byte) (err error) {
	*t, err = ParseMsgType(string(b))
	return err
}

func (k FrameKind) MarshalText() ([]byte, error) {
	if k != FrameComplete && k != FrameIncremental {
		return nil, fmt.Errorf("%w: frame kind %d has no name", ErrMalformed, uint8(k))
	}
	return []byte(k.String()), nil
}

func (k *FrameKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseFrameKind(string(b))
	return err
}

func (r ReportResult) MarshalText() ([]byte, error) {
	if r >= numReportResults {
		return nil, fmt.Errorf("%w: report result %d has no name", ErrMalformed, uint8(r))
	}
	return []byte(r.String()), nil
}

func (r *ReportResult) UnmarshalText(b []byte) (err error) {
	*r, err = ParseReportResult(string(b))
	return err
}
