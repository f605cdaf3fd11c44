package client

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("5s", "1m30s"); a JSON number is read as nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use e.g. 500ms, 5s, 1m)", s)
		}
		*d = Duration(v)
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not a duration (use a string such as \"5s\" or nanoseconds)", b)
	}
	*d = Duration(v)
	return nil
}

// ServiceSpec is what a user declares. Omitted fields take the defaults
// documented in api/README.md.
type ServiceSpec struct {
	Name        string         `json:"name"`
	Mode        string         `json:"mode,omitempty"`     // replicated (default) or global
	Replicas    *uint32        `json:"replicas,omitempty"` // replicated only; default 1
	Command     []string       `json:"command,omitempty"`  // argv of the process each task runs
	Env         []string       `json:"env,omitempty"`      // KEY=VALUE
	Dir         string         `json:"dir,omitempty"`
	StopGrace   *Duration      `json:"stop_grace,omitempty"` // SIGTERM → SIGKILL; default 10s
	Image       string         `json:"image,omitempty"`      // opaque to Shoal
	Networks    []string       `json:"networks,omitempty"`
	Constraints []string       `json:"constraints,omitempty"` // e.g. node.labels.zone==a
	Reserve     Resources      `json:"reserve,omitempty"`
	Restart     *RestartPolicy `json:"restart,omitempty"`
	Update      *UpdateConfig  `json:"update,omitempty"`
	// Rollback is how a rollback from this spec moves the tasks back
	// (default: one at a time, monitor 5s, pause on failure, stop-first);
	// its failure_action is pause or continue.
	Rollback   *UpdateConfig     `json:"rollback,omitempty"`
	Disconnect *Disconnect       `json:"disconnect,omitempty"`
	Placement  *Placement        `json:"placement,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"` // the user's metadata; changing it replaces no task
}

// Placement shapes where a replicated service's tasks go among the nodes
// that pass its constraints.
type Placement struct {
	// Preferences spread the tasks evenly over a label's values, outermost
	// first, e.g. ["node.labels.zone"].
	Preferences []string `json:"preferences,omitempty"`
	// MaxReplicasPerNode bounds the service's tasks per node; 0 = no limit.
	MaxReplicasPerNode uint32 `json:"max_replicas_per_node,omitempty"`
	Strategy           string `json:"strategy,omitempty"` // spread (default) or binpack
}

// Resources reserved per task.
type Resources struct {
	CPU    int64 `json:"cpu,omitempty"`    // milli-cores
	Memory int64 `json:"memory,omitempty"` // bytes
}

// RestartPolicy says when a dead task is replaced.
type RestartPolicy struct {
	Condition   string    `json:"condition,omitempty"` // any (default), on-failure, none
	Delay       *Duration `json:"delay,omitempty"`     // default 5s
	MaxAttempts uint32    `json:"max_attempts,omitempty"`
	Window      Duration  `json:"window,omitempty"`
}

// UpdateConfig says how tasks move to a new spec.
type UpdateConfig struct {
	Parallelism     *uint32   `json:"parallelism,omitempty"` // default 1; 0 = all at once
	Delay           Duration  `json:"delay,omitempty"`
	FailureAction   string    `json:"failure_action,omitempty"` // pause (default), continue, rollback
	Monitor         *Duration `json:"monitor,omitempty"`        // default 5s
	MaxFailureRatio float64   `json:"max_failure_ratio,omitempty"`
	Order           string    `json:"order,omitempty"` // stop-first (default), start-first
}

// Disconnect is a service's disconnect window.
type Disconnect struct {
	LostAfter Duration `json:"lost_after,omitempty"`
	NoReplace bool     `json:"no_replace,omitempty"`
	Reconcile string   `json:"reconcile,omitempty"` // best_score (default), keep_original, keep_replacement, longest_running
}

// Service is a stored service.
type Service struct {
	ID          uint32       `json:"id"`
	Group       int          `json:"group"`
	Spec        ServiceSpec  `json:"spec"`
	SpecVersion uint32       `json:"spec_version"`
	ModifyIndex uint64       `json:"modify_index"` // pass as ?check_index= to update only if unchanged
	Removing    bool         `json:"removing,omitempty"`
	Update      UpdateStatus `json:"update"`
	// Tasks counts the service's tasks by observed state; Running and
	// Desired summarize convergence (desired is replicas, or eligible
	// nodes for a global service as far as tasks exist). Running counts
	// tasks running at the current spec version only; RunningAny counts
	// those of any version, so during a rolling update it also counts the
	// old version's tasks still serving. Neither counts a task held aside
	// on a disconnected node (not known to run; its replacement fills the
	// slot), so neither exceeds the slots while a node is away.
	Tasks      map[string]int `json:"tasks"`
	Running    int            `json:"running"`
	RunningAny int            `json:"running_any"`
	Desired    int            `json:"desired"`
	// Convergence is the manager's answer to "has this service settled,
	// and if not, why".
	Convergence Convergence `json:"convergence"`
}

// Convergence states.
const (
	// Converging: tasks or an update still move; waiting helps.
	Converging = "converging"
	// Converged: every wanted task of the current spec runs, or ended for
	// good (completed one-shot tasks unless the service restarts
	// completed tasks; failed ones when it never restarts), and no update
	// is in flight. Failed counts the failed ones.
	Converged = "converged"
	// UpdatePaused: the update (or its rollback) stopped and the old
	// version's tasks serve on; nothing moves until the user resumes,
	// updates again or rolls back.
	UpdatePaused = "paused"
)

// Convergence is whether a service has settled, computed by the manager
// from the same state it renders.
type Convergence struct {
	State string `json:"state"` // Converging, Converged or UpdatePaused
	// Failed counts the tasks that ended in failure and will not be
	// restarted (restart condition none); they count as settled.
	Failed int `json:"failed,omitempty"`
	// Why says in a sentence what a converging or paused service waits
	// for, or which tasks of a converged one failed for good.
	Why string `json:"why,omitempty"`
}

// UpdateStatus is the progress of a service's last update.
type UpdateStatus struct {
	State       string    `json:"state,omitempty"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	Message     string    `json:"message,omitempty"`
	Failures    uint32    `json:"failures,omitempty"`
}

// Task is one task with its recent history.
type Task struct {
	ID          string         `json:"id"` // decimal task ID
	Service     string         `json:"service"`
	Slot        uint32         `json:"slot"`
	SpecVersion uint32         `json:"spec_version"`
	Node        uint32         `json:"node,omitempty"`
	NodeName    string         `json:"node_name,omitempty"`
	Desired     string         `json:"desired"`
	State       string         `json:"state"`
	ExitCode    int32          `json:"exit_code,omitempty"`
	Message     string         `json:"message,omitempty"`
	Since       time.Time      `json:"since"`
	Addresses   []TaskAddress  `json:"addresses,omitempty"`
	History     []HistoryEntry `json:"history,omitempty"`
}

// TaskAddress is one of a task's addresses.
type TaskAddress struct {
	Network  string `json:"network"`
	Addr     string `json:"addr"`
	Released bool   `json:"released,omitempty"`
}

// HistoryEntry is one recorded change of a task.
type HistoryEntry struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	State   string    `json:"state"`
	By      string    `json:"by"`
	Desired string    `json:"desired"`
}

// Node is a machine that runs tasks.
type Node struct {
	ID           uint32            `json:"id"`
	Name         string            `json:"name"`
	Role         string            `json:"role,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	CPU          int64             `json:"cpu"`
	Memory       int64             `json:"memory"`
	Availability string            `json:"availability"`
	Status       string            `json:"status"`
	StatusSince  time.Time         `json:"status_since"`
	Tasks        int               `json:"tasks"` // tasks at or past assigned, not terminal
}

// NodeUpdate changes a node's user-owned fields; nil fields stay as they are.
type NodeUpdate struct {
	Availability *string            `json:"availability,omitempty"` // active, pause, drain
	Labels       *map[string]string `json:"labels,omitempty"`
}

// NetworkSpec declares a network.
type NetworkSpec struct {
	Name     string   `json:"name"`
	Subnet   string   `json:"subnet"`             // CIDR, e.g. 10.0.0.0/24
	Reserved []string `json:"reserved,omitempty"` // "first-last" or single addresses
}

// Network is a stored network with its address counts.
type Network struct {
	ID          uint32      `json:"id"`
	Spec        NetworkSpec `json:"spec"`
	Size        int         `json:"size"`
	Free        int         `json:"free"`
	Held        int         `json:"held"`
	Quarantined int         `json:"quarantined"`
}

// Status summarizes the cluster as the answering replica sees it.
type Status struct {
	Replica uint64 `json:"replica"`
	Leading bool   `json:"leading"` // leads the cluster group (runs the leader duties)
	// Leader is the replica leading the cluster group as this one knows
	// it (0: none known), and LeaderSince when this replica first heard
	// of that leader in its term (RFC 3339): when it won, if it leads.
	Leader      uint64        `json:"leader,omitempty"`
	LeaderSince string        `json:"leader_since,omitempty"`
	Managers    []Manager     `json:"managers"`
	Groups      []GroupStatus `json:"groups"`
	Services    int           `json:"services"`
	Tasks       int           `json:"tasks"`
	Nodes       int           `json:"nodes"`
	// Settings are the cluster settings (the cluster group's).
	Settings ClusterSettings `json:"settings"`
	// Monitor holds the answering replica's node monitor timers (its
	// serve flags), which it uses while it leads the cluster group.
	Monitor MonitorTimers `json:"monitor"`
	Index   string        `json:"index"` // cursor token of what this answer reflects
}

// ClusterSettings are the settings every replica applies alike (GET and
// POST /v1/cluster/settings).
type ClusterSettings struct {
	// TaskHistoryLimit is the most tasks a slot keeps, counting its live
	// task (1-100; default 5).
	TaskHistoryLimit int `json:"task_history_limit"`
}

// ClusterSettingsUpdate changes the settings it names; the others keep
// their values.
type ClusterSettingsUpdate struct {
	TaskHistoryLimit *int `json:"task_history_limit,omitempty"`
}

// MonitorTimers are a replica's node monitor timers (serve
// --failover-grace and --orphan-timeout).
type MonitorTimers struct {
	// FailoverGrace: after this replica becomes leader, no node is marked
	// down or orphaned for this long.
	FailoverGrace Duration `json:"failover_grace"`
	// OrphanTimeout: a node down this long is orphaned (its tasks
	// orphaned, its quarantined addresses freed).
	OrphanTimeout Duration `json:"orphan_timeout"`
}

// Manager is one manager replica.
type Manager struct {
	Replica uint64 `json:"replica"`
	API     string `json:"api"`
}

// GroupStatus is one Raft group on the answering replica.
type GroupStatus struct {
	Group        int    `json:"group"`
	Leader       uint64 `json:"leader"` // replica ID; 0 when unknown
	AppliedIndex uint64 `json:"applied_index"`
	Services     int    `json:"services"`
	Tasks        int    `json:"tasks"`
	// Hash is the group's state hash at AppliedIndex (hex), only with
	// GET /v1/status?hash=true: replicas at the same index must agree.
	Hash string `json:"hash,omitempty"`
}

// List is one page of a list.
type List[T any] struct {
	Items     []T    `json:"items"`
	NextToken string `json:"next_token,omitempty"` // pass as ?next_token= for the next page
}

// Event is one line of the event stream. Object holds the object as it was
// when the event was sent (it may already reflect later changes); it is
// absent for deletions.
type Event struct {
	Index   string          `json:"index"` // cursor token to resume after this event
	Group   int             `json:"group"` // the group whose entry made the change
	Raft    uint64          `json:"raft"`  // that entry's index
	Topic   string          `json:"topic"` // service, task, node, or heartbeat
	Type    string          `json:"type"`  // e.g. changed, deleted, state
	Key     string          `json:"key"`   // service name, task ID or node ID
	Service *Service        `json:"service,omitempty"`
	Task    *Task           `json:"task,omitempty"`
	Node    *Node           `json:"node,omitempty"`
	Error   *ErrorBody      `json:"error,omitempty"` // the stream ends after an error line
	Raw     json.RawMessage `json:"-"`
}

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Field string `json:"field,omitempty"` // the spec field at fault, with invalid_spec
	// With unknown_outcome: the write's request ID, when the manager
	// stopped waiting for it, and the time after which it can no longer
	// take effect (deadline plus the cluster's clock bound).
	RequestID string     `json:"request_id,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	NotAfter  *time.Time `json:"not_after,omitempty"`
}

// RequestOutcome answers GET /v1/requests/{id}: what became of a write.
type RequestOutcome struct {
	RequestID string `json:"request_id"`
	// Outcome is applied, not_applied (it never took effect and never
	// will), pending (no group applied it yet, but it may still take
	// effect until NotAfter) or not_seen (no group applied it in the last
	// ten minutes; without its not_after the manager cannot say whether
	// it still may).
	Outcome string `json:"outcome"`
	// With applied: the group and Raft index of the entry that applied
	// it, when, and the ID of the object it created or acted on.
	Group     int        `json:"group,omitempty"`
	Index     uint64     `json:"index,omitempty"`
	AppliedAt *time.Time `json:"applied_at,omitempty"`
	ObjectID  uint64     `json:"object_id,omitempty"`
	NotAfter  *time.Time `json:"not_after,omitempty"`
	Message   string     `json:"message,omitempty"`
}

// Outcomes of a write (RequestOutcome.Outcome).
const (
	OutcomeApplied    = "applied"
	OutcomeNotApplied = "not_applied"
	OutcomePending    = "pending"
	OutcomeNotSeen    = "not_seen"
)

// RequestIDHeader carries a write's request ID, both ways.
const RequestIDHeader = "X-Shoal-Request-Id"

// Error codes of the user API.
const (
	CodeMalformed    = "malformed"         // 400: the body is not valid JSON or a parameter is malformed
	CodeNotFound     = "not_found"         // 404
	CodeConflict     = "conflict"          // 409: exists already, or not allowed in the current state
	CodeStale        = "stale_index"       // 409: ?check_index= is older than the object
	CodeTooLarge     = "too_large"         // 413
	CodeInvalidSpec  = "invalid_spec"      // 422
	CodeIndexTooOld  = "index_too_old"     // 410: the event stream cannot resume that far back
	CodeUnavailable  = "unavailable"       // 503: no leader or not ready; retry after Retry-After
	CodeUnknown      = "unknown_outcome"   // 503: a write was sent but not confirmed in time; see ErrorBody.RequestID
	CodeForgotten    = "request_forgotten" // 410: the request ID is older than the ten minutes IDs are kept
	CodeUnauthorized = "unauthorized"      // 401: no valid client certificate
	CodeForbidden    = "forbidden"         // 403: the certificate's role may not do this
	CodeJoinRefused  = "join_refused"      // 401: the join token was refused (the message says why)
	CodeRateLimited  = "rate_limited"      // 429: too many failed attempts; retry after Retry-After
	CodeInternalFail = "internal"          // 500
)
