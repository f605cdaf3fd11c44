package wire

import "shoal/statemachine"

// MsgType says which message a frame carries. It is the frame's type byte.
type MsgType uint8

// Message types. Zero is never a valid type.
const (
	TypeError MsgType = iota + 1
	TypeSessionRequest
	TypeSession
	TypeHeartbeat
	TypeHeartbeatAck
	TypeAssignmentsRequest
	TypeAssignments
	TypeStatusBatch
	TypeStatusAck
	TypeSyncRequest
	TypeSyncAnswer
	TypeLogBatch
	TypeLogAck
	numMsgTypes
)

var msgTypeNames = [...]string{"", "error", "session_request", "session", "heartbeat", "heartbeat_ack",
	"assignments_request", "assignments", "status_batch", "status_ack", "sync_request", "sync_answer",
	"log_batch", "log_ack"}

// Valid reports whether t is a known message type.
func (t MsgType) Valid() bool { return t >= TypeError && t < numMsgTypes }

// String returns the type's snake_case name, as used in JSON and in errors.
func (t MsgType) String() string {
	if t.Valid() {
		return msgTypeNames[t]
	}
	return "MsgType(" + itoa(uint64(t)) + ")"
}

// Message is one agent↔manager message. Every message is a pointer to one of
// the structs below.
type Message interface {
	Type() MsgType
}

// Error codes the manager answers with (Error.Code).
const (
	CodeNotLeader        = "not_leader"             // Leader names the leader's API address
	CodeBusy             = "busy"                   // too many session setups; retry after RetryAfter
	CodeUnknownSession   = "unknown_session"        // open a new session
	CodeNodeNotReady     = "node_not_ready"         // the node does not accept updates yet
	CodeNodeRemoved      = "node_removed"           // the node was removed from the cluster; stop
	CodeBadRequest       = "bad_request"            // the request could not be decoded or makes no sense
	CodeInternal         = "internal"               // the manager failed; retry
	CodeUnavailable      = "unavailable"            // no leader or no quorum; retry after RetryAfter
	CodeNoQuorum         = "no_quorum"              // this manager cannot reach a quorum: use another (Leader names the leader it last knew)
	CodeForbidden        = "forbidden"              // the client certificate may not do this (another node's data)
	CodeUnauthorized     = "unauthorized"           // no valid client certificate: join the cluster first
	CodeUnsupportedMedia = "unsupported_media_type" // the body is neither a frame nor JSON (Content-Type)
)

// Error is the manager's refusal of a request. It implements error: Error()
// returns Message, which is meant for users; errors.Is matches by Code.
type Error struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retry_after,omitempty"` // ns; 0: no advice
	Leader     string `json:"leader,omitempty"`      // API address of the leader, with CodeNotLeader
}

// NodeDescription is what an agent tells the manager about its node.
type NodeDescription struct {
	Hostname     string            `json:"hostname"`
	Labels       map[string]string `json:"labels,omitempty"`
	CPU          int64             `json:"cpu"`    // milli-cores
	Memory       int64             `json:"memory"` // bytes
	AgentVersion string            `json:"agent_version"`
}

// SessionRequest opens a session. NodeID 0 asks for a new node.
type SessionRequest struct {
	NodeID statemachine.NodeID `json:"node_id"` // 0: new node
	Node   NodeDescription     `json:"node"`
	// Key names a new node's agent (NodeID 0): a random string the agent
	// keeps in its data directory before its first session, so a first
	// session asked again (its answer was lost) finds the node the first
	// attempt made instead of making another. Empty: no key (older agents).
	Key string `json:"key,omitempty"`
}

// Session is the manager's answer to a SessionRequest: the node's ID, the
// session every later request carries, and the timing the agent follows.
type Session struct {
	NodeID          statemachine.NodeID `json:"node_id"`
	SessionID       uint64              `json:"session_id"`
	HeartbeatPeriod int64               `json:"heartbeat_period"`   // ns
	SyncInterval    int64               `json:"sync_interval"`      // ns
	Managers        []string            `json:"managers,omitempty"` // API addresses
	Groups          uint16              `json:"groups"`             // service groups
}

// Heartbeat tells the leader the node is alive. It lives in leader memory only.
type Heartbeat struct {
	NodeID    statemachine.NodeID `json:"node_id"`
	SessionID uint64              `json:"session_id"`
}

// HeartbeatAck gives the next heartbeat period and the node's status.
type HeartbeatAck struct {
	Period int64                   `json:"period"` // ns
	Status statemachine.NodeStatus `json:"status"`
}

// AssignmentsRequest is a long-poll for the node's assignments past Cursor.
type AssignmentsRequest struct {
	NodeID    statemachine.NodeID `json:"node_id"`
	SessionID uint64              `json:"session_id"`
	Cursor    Cursor              `json:"cursor"` // empty: send COMPLETE
	Wait      int64               `json:"wait"`   // ns long-poll
}

// FrameKind says whether an Assignments frame is the whole set or a delta.
type FrameKind uint8

// Assignments frame kinds.
const (
	FrameComplete    FrameKind = 1
	FrameIncremental FrameKind = 2
)

// String returns the kind's lowercase name.
func (k FrameKind) String() string {
	switch k {
	case FrameComplete:
		return "complete"
	case FrameIncremental:
		return "incremental"
	}
	return "FrameKind(" + itoa(uint64(k)) + ")"
}

// Spec is what an agent needs to run a task of one service at one version.
type Spec struct {
	Service   string   `json:"service"`
	Version   uint32   `json:"version"`
	Command   []string `json:"command,omitempty"` // argv
	Env       []string `json:"env,omitempty"`     // KEY=VALUE
	Dir       string   `json:"dir,omitempty"`
	StopGrace int64    `json:"stop_grace"` // ns
}

// Address is one network address attached to a task.
type Address struct {
	Network string `json:"network"`
	Addr    string `json:"addr"` // e.g. "10.0.0.5/24"
}

// Assignment is one task as the node should hold it.
type Assignment struct {
	Task        statemachine.TaskID       `json:"task"`
	Service     string                    `json:"service"`
	Slot        uint32                    `json:"slot"`
	SpecVersion uint32                    `json:"spec_version"`
	Desired     statemachine.DesiredState `json:"desired"`
	State       statemachine.TaskState    `json:"state"` // manager's last observed
	Addresses   []Address                 `json:"addresses,omitempty"`
}

// Assignments is one answer to an AssignmentsRequest: a COMPLETE set (maybe
// in chunks, see SplitComplete) or an INCREMENTAL change.
type Assignments struct {
	Kind      FrameKind             `json:"kind"`
	Resync    bool                  `json:"resync"` // the agent's cursor was unknown or too old
	Last      bool                  `json:"last"`   // last chunk of a COMPLETE (always true for INCREMENTAL)
	AppliesTo Cursor                `json:"applies_to"`
	ResultsIn Cursor                `json:"results_in"`
	Seqs      []uint64              `json:"seqs,omitempty"`  // per group: the node's assignment sequence this frame brings the agent to; index = group
	Specs     []Spec                `json:"specs,omitempty"` // specs the tasks refer to by (Service, SpecVersion), each sent once per session
	Tasks     []Assignment          `json:"tasks,omitempty"` // upserts
	Removed   []statemachine.TaskID `json:"removed,omitempty"`
	// Leader is the API address of the cluster's leader as the answering
	// manager knows it ("" if it knows none): a poll that waited is
	// answered as soon as the leader changes, so an agent sends its next
	// heartbeat to the new leader without first trying the old one.
	Leader string `json:"leader,omitempty"`
	// Logs are log subscriptions that want output of this node's tasks
	// (logs.go), carried by INCREMENTAL frames only (SplitComplete drops
	// them). A manager may send one again; the agent runs each ID once.
	Logs []LogSubscription `json:"logs,omitempty"`
}

// StatusReport is one observed task state.
type StatusReport struct {
	Task     statemachine.TaskID    `json:"task"`
	State    statemachine.TaskState `json:"state"`
	ExitCode int32                  `json:"exit_code"`
	Message  string                 `json:"message,omitempty"`
	At       int64                  `json:"at"` // unix ns observed
}

// StatusBatch carries an agent's status reports.
type StatusBatch struct {
	NodeID    statemachine.NodeID   `json:"node_id"`
	SessionID uint64                `json:"session_id"`
	Reports   []StatusReport        `json:"reports,omitempty"`
	ReReport  bool                  `json:"re_report"`      // this batch ends the re-report after a reconnect
	Held      []statemachine.TaskID `json:"held,omitempty"` // with ReReport: every task the agent holds
}

// ReportResult is the manager's verdict on one status report.
type ReportResult uint8

// Report results.
const (
	ReportAccepted ReportResult = iota // stored
	ReportRetry                        // node not accepting updates yet: send again later
	ReportRejected                     // final: the manager refuses it, do not resend
	numReportResults
)

var reportResultNames = [...]string{"accepted", "retry", "rejected"}

// String returns the result's lowercase name.
func (r ReportResult) String() string {
	if r < numReportResults {
		return reportResultNames[r]
	}
	return "ReportResult(" + itoa(uint64(r)) + ")"
}

// StatusAck answers a StatusBatch.
type StatusAck struct {
	Results  []ReportResult `json:"results,omitempty"`  // one per report, in order
	Messages []string       `json:"messages,omitempty"` // same length or empty
}

// SyncRequest is the agent's periodic report of what it holds (worker-driven GC).
type SyncRequest struct {
	NodeID    statemachine.NodeID   `json:"node_id"`
	SessionID uint64                `json:"session_id"`
	Seqs      []uint64              `json:"seqs,omitempty"` // per group: last applied assignment sequence
	Held      []statemachine.TaskID `json:"held,omitempty"`
}

// SyncAnswer lists the held tasks the agent must destroy.
type SyncAnswer struct {
	Destroy []statemachine.TaskID `json:"destroy,omitempty"`
}

// Type implementations: every message is used by pointer.

func (*Error) Type() MsgType              { return TypeError }
func (*SessionRequest) Type() MsgType     { return TypeSessionRequest }
func (*Session) Type() MsgType            { return TypeSession }
func (*Heartbeat) Type() MsgType          { return TypeHeartbeat }
func (*HeartbeatAck) Type() MsgType       { return TypeHeartbeatAck }
func (*AssignmentsRequest) Type() MsgType { return TypeAssignmentsRequest }
func (*Assignments) Type() MsgType        { return TypeAssignments }
func (*StatusBatch) Type() MsgType        { return TypeStatusBatch }
func (*StatusAck) Type() MsgType          { return TypeStatusAck }
func (*SyncRequest) Type() MsgType        { return TypeSyncRequest }
func (*SyncAnswer) Type() MsgType         { return TypeSyncAnswer }

// New returns a new zero message of type t, or nil for an unknown type.
func New(t MsgType) Message {
	switch t {
	case TypeError:
		return new(Error)
	case TypeSessionRequest:
		return new(SessionRequest)
	case TypeSession:
		return new(Session)
	case TypeHeartbeat:
		return new(Heartbeat)
	case TypeHeartbeatAck:
		return new(HeartbeatAck)
	case TypeAssignmentsRequest:
		return new(AssignmentsRequest)
	case TypeAssignments:
		return new(Assignments)
	case TypeStatusBatch:
		return new(StatusBatch)
	case TypeStatusAck:
		return new(StatusAck)
	case TypeSyncRequest:
		return new(SyncRequest)
	case TypeSyncAnswer:
		return new(SyncAnswer)
	case TypeLogBatch:
		return new(LogBatch)
	case TypeLogAck:
		return new(LogAck)
	}
	return nil
}

// Join appends the next frame of an answer sent as several frames (a
// COMPLETE over MaxFrame) to a: its specs, tasks and removals, and its
// Last and Leader.
func (a *Assignments) Join(part *Assignments) {
	a.Specs = append(a.Specs, part.Specs...)
	a.Tasks = append(a.Tasks, part.Tasks...)
	a.Removed = append(a.Removed, part.Removed...)
	a.Last = part.Last
	if part.Leader != "" {
		a.Leader = part.Leader
	}
}
