package wire

import (
	"encoding/binary"
	"fmt"

	"shoal/statemachine"
)

// Task output (docs/logs.md). A manager that holds a user's log
// subscription hands it to the nodes that run the wanted tasks inside the
// answers to their assignment polls (Assignments.Logs); each node then
// posts the lines, in LogBatch frames, to the manager the subscription
// names, which answers each batch with a LogAck.

// LogSubscription asks one node for the output of some of its tasks.
type LogSubscription struct {
	ID      uint64                `json:"id"`
	Publish string                `json:"publish"` // API address of the manager the lines go to
	Tasks   []statemachine.TaskID `json:"tasks"`   // this node's tasks whose output is wanted
	Follow  bool                  `json:"follow"`  // keep sending new lines until told to stop
	Tail    int64                 `json:"tail"`    // the last Tail lines of each task; negative: all
	Since   int64                 `json:"since"`   // unix ns: only lines read at or after it; 0: all
}

// LogStream says where a line came from.
type LogStream uint8

// Log streams.
const (
	LogStdout LogStream = 1
	LogStderr LogStream = 2
	// LogNote is the agent speaking about a task's output, not the task
	// (for example: this agent keeps no output for it).
	LogNote LogStream = 3
)

var logStreamNames = []string{1: "stdout", 2: "stderr", 3: "note"}

// String returns the stream's name.
func (s LogStream) String() string {
	if int(s) < len(logStreamNames) && logStreamNames[s] != "" {
		return logStreamNames[s]
	}
	return "LogStream(" + itoa(uint64(s)) + ")"
}

func (s LogStream) MarshalText() ([]byte, error) {
	if int(s) >= len(logStreamNames) || logStreamNames[s] == "" {
		return nil, fmt.Errorf("%w: log stream %d has no name", ErrMalformed, uint8(s))
	}
	return []byte(s.String()), nil
}

func (s *LogStream) UnmarshalText(b []byte) error {
	v, err := parseName(logStreamNames, "log stream", string(b))
	*s = LogStream(v)
	return err
}

// LogLine is one line of a task's output, without its newline.
type LogLine struct {
	Task   statemachine.TaskID `json:"task"`
	Stream LogStream           `json:"stream"`
	At     int64               `json:"at"` // unix ns (see docs/logs.md for what it means)
	Data   string              `json:"data"`
}

// LogBatch carries a node's lines for one subscription.
type LogBatch struct {
	NodeID statemachine.NodeID `json:"node_id"`
	Sub    uint64              `json:"sub"`
	Lines  []LogLine           `json:"lines,omitempty"`
	// Done: the node has sent all it will send for the subscription (a
	// subscription that does not follow, or a followed task whose output
	// ended for good).
	Done bool `json:"done"`
}

// LogAck answers a LogBatch. Stop: the subscription is over (its user
// left, or the manager does not know it): send nothing more for it.
type LogAck struct {
	Stop bool `json:"stop"`
}

func (*LogBatch) Type() MsgType { return TypeLogBatch }
func (*LogAck) Type() MsgType   { return TypeLogAck }

func appendLogSubscriptions(b []byte, subs []LogSubscription) []byte {
	b = binary.AppendUvarint(b, uint64(len(subs)))
	for i := range subs {
		s := &subs[i]
		e := len(b)
		b = beginElem(b)
		b = binary.AppendUvarint(b, s.ID)
		b = appendString(b, s.Publish)
		b = appendTaskIDs(b, s.Tasks)
		b = appendBool(b, s.Follow)
		b = binary.AppendVarint(b, s.Tail)
		b = binary.AppendVarint(b, s.Since)
		b = endElem(b, e)
	}
	return b
}

func (r *reader) logSubscriptions(dst []LogSubscription) []LogSubscription {
	n := r.count(1, "logs")
	dst = grow(dst, n)
	for i := range dst {
		s := &dst[i]
		r.more("logs")
		rest := r.enter("log subscription")
		s.ID = r.uvarint()
		s.Publish = r.name("publish")
		s.Tasks = r.taskIDs(s.Tasks, "tasks")
		s.Follow = r.bool("follow")
		s.Tail = r.varint()
		s.Since = r.varint()
		r.leave(rest)
	}
	return dst
}

func appendLogBatch(b []byte, m *LogBatch) ([]byte, error) {
	for i := range m.Lines {
		if s := m.Lines[i].Stream; int(s) >= len(logStreamNames) || logStreamNames[s] == "" {
			return b, errorf(ErrMalformed, "log_batch: line %d: log stream %d has no name", i, s)
		}
	}
	b = binary.AppendUvarint(b, uint64(m.NodeID))
	b = binary.AppendUvarint(b, m.Sub)
	b = binary.AppendUvarint(b, uint64(len(m.Lines)))
	for i := range m.Lines {
		l := &m.Lines[i]
		e := len(b)
		b = beginElem(b)
		b = binary.AppendUvarint(b, uint64(l.Task))
		b = append(b, byte(l.Stream))
		b = binary.AppendVarint(b, l.At)
		b = appendString(b, l.Data)
		b = endElem(b, e)
	}
	return appendBool(b, m.Done), nil
}

func (r *reader) logBatch(m *LogBatch) {
	m.NodeID = r.nodeID()
	m.Sub = r.uvarint()
	n := r.count(1, "lines")
	m.Lines = grow(m.Lines, n)
	for i := range m.Lines {
		l := &m.Lines[i]
		r.more("lines")
		rest := r.enter("line")
		l.Task = statemachine.TaskID(r.uvarint())
		l.Stream = LogStream(r.enum(logStreamNames, "log stream"))
		l.At = r.varint()
		l.Data = r.string("data")
		r.leave(rest)
	}
	m.Done = r.bool("done")
}
