package statemachine

import "fmt"

// TaskState is a task's observed state. States are ranked; a task only ever
// moves to a higher rank.
type TaskState uint8

// Observed task states in rank order.
const (
	StateNew TaskState = iota
	StatePending
	StateAssigned
	StateAccepted
	StatePreparing
	StateReady
	StateStarting
	StateRunning
	StateComplete
	StateShutdown
	StateFailed
	StateRejected
	StateOrphaned
	numTaskStates
)

var taskStateNames = [...]string{"new", "pending", "assigned", "accepted", "preparing",
	"ready", "starting", "running", "complete", "shutdown", "failed", "rejected", "orphaned"}

func (s TaskState) String() string {
	if s < numTaskStates {
		return taskStateNames[s]
	}
	return fmt.Sprintf("TaskState(%d)", uint8(s))
}

// Terminal reports whether the state is past running: the task's process is
// gone (or, for orphaned, given up on).
func (s TaskState) Terminal() bool { return s > StateRunning && s < numTaskStates }

// Valid reports whether s is a known state.
func (s TaskState) Valid() bool { return s < numTaskStates }

// ParseTaskState parses a state name as printed by String.
func ParseTaskState(name string) (TaskState, error) {
	for i, n := range taskStateNames {
		if n == name {
			return TaskState(i), nil
		}
	}
	return 0, fmt.Errorf("statemachine: unknown task state %q", name)
}

// DesiredState is what the orchestrator wants of a task. Remove is never an
// observed state.
type DesiredState uint8

// Desired states, in rank order. Desired state only moves up, except that a
// task held at Ready (start-first update) may be promoted to Running.
const (
	DesiredReady DesiredState = iota
	DesiredRunning
	DesiredShutdown
	DesiredRemove
	numDesiredStates
)

var desiredNames = [...]string{"ready", "running", "shutdown", "remove"}

func (d DesiredState) String() string {
	if d < numDesiredStates {
		return desiredNames[d]
	}
	return fmt.Sprintf("DesiredState(%d)", uint8(d))
}

// Stopping reports whether the task is wanted stopped (shutdown or remove).
func (d DesiredState) Stopping() bool { return d >= DesiredShutdown }

// Component is who made a transition.
type Component uint8

// Components that may change tasks.
const (
	CompUser Component = iota
	CompOrchestrator
	CompAllocator
	CompScheduler
	CompAgent
	CompNodeMonitor
	CompReaper
	numComponents
)

var componentNames = [...]string{"user", "orchestrator", "allocator", "scheduler", "agent", "node-monitor", "reaper"}

func (c Component) String() string {
	if c < numComponents {
		return componentNames[c]
	}
	return fmt.Sprintf("Component(%d)", uint8(c))
}

// NodeStatus is a node's connection status as seen by the node monitor.
type NodeStatus uint8

// Node statuses.
const (
	NodeReady NodeStatus = iota
	NodeDisconnected
	NodeInitializing
	NodeDown
	numNodeStatuses
)

var nodeStatusNames = [...]string{"ready", "disconnected", "initializing", "down"}

func (s NodeStatus) String() string {
	if s < numNodeStatuses {
		return nodeStatusNames[s]
	}
	return fmt.Sprintf("NodeStatus(%d)", uint8(s))
}

// AcceptsUpdates reports whether task updates from a node in this status are
// accepted (a reconnecting node heartbeats first and is initializing).
func (s NodeStatus) AcceptsUpdates() bool { return s == NodeReady || s == NodeInitializing }

// Role is a node's role in the cluster. The zero value is worker.
type Role uint8

// Node roles.
const (
	RoleWorker Role = iota
	RoleManager
	numRoles
)

var roleNames = [...]string{"worker", "manager"}

func (r Role) String() string {
	if r < numRoles {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole parses a role name as printed by String; "" is a worker (the
// encoding of nodes written before roles were typed).
func ParseRole(name string) (Role, error) {
	switch name {
	case "", "worker":
		return RoleWorker, nil
	case "manager":
		return RoleManager, nil
	}
	return 0, fmt.Errorf("%w: unknown node role %q (worker or manager)", ErrInvalid, name)
}

// PlacementStrategy chooses how a service's tasks fill the eligible nodes.
type PlacementStrategy uint8

// Placement strategies.
const (
	StrategySpread PlacementStrategy = iota
	StrategyBinPack
	numStrategies
)

var strategyNames = [...]string{"spread", "binpack"}

func (s PlacementStrategy) String() string {
	if s < numStrategies {
		return strategyNames[s]
	}
	return fmt.Sprintf("PlacementStrategy(%d)", uint8(s))
}

// Availability is the operator's choice for a node.
type Availability uint8

// Node availabilities.
const (
	AvailActive Availability = iota
	AvailPause
	AvailDrain
	numAvailabilities
)

var availNames = [...]string{"active", "pause", "drain"}

func (a Availability) String() string {
	if a < numAvailabilities {
		return availNames[a]
	}
	return fmt.Sprintf("Availability(%d)", uint8(a))
}

// ServiceMode says how a service's tasks map to slots.
type ServiceMode uint8

// Service modes.
const (
	ModeReplicated ServiceMode = iota
	ModeGlobal
)

func (m ServiceMode) String() string {
	switch m {
	case ModeReplicated:
		return "replicated"
	case ModeGlobal:
		return "global"
	}
	return fmt.Sprintf("ServiceMode(%d)", uint8(m))
}

// RestartCondition says when a dead task in a live slot is replaced.
type RestartCondition uint8

// Restart conditions (SwarmKit's, default any).
const (
	RestartAny RestartCondition = iota
	RestartOnFailure
	RestartNone
)

func (r RestartCondition) String() string {
	switch r {
	case RestartAny:
		return "any"
	case RestartOnFailure:
		return "on-failure"
	case RestartNone:
		return "none"
	}
	return fmt.Sprintf("RestartCondition(%d)", uint8(r))
}

// StopReason is why the orchestrator stopped a task.
type StopReason uint8

// Stop reasons. A failed task's slot is refilled only if its restart policy
// says so; a moved, surplus or updated task's slot is refilled regardless.
const (
	StopNone    StopReason = iota
	StopFailed             // it died, was rejected, or its node went down
	StopMoved              // its node was drained or left (global: no longer eligible)
	StopSurplus            // a newer task of the slot runs
	StopUpdated            // replaced by a newer spec version
	numStopReasons
)

var stopReasonNames = [...]string{"", "failed", "moved", "surplus", "updated"}

func (r StopReason) String() string {
	if r < numStopReasons {
		return stopReasonNames[r]
	}
	return fmt.Sprintf("StopReason(%d)", uint8(r))
}

// HistoryKind says what a history entry records.
type HistoryKind uint8

// History entry kinds: a state transition, or a connectivity marker that
// leaves the observed state unchanged (ranks never go back).
const (
	HistTransition HistoryKind = iota
	HistDesired
	HistUnknown
	HistReconnect
	HistLost
)

func (k HistoryKind) String() string {
	switch k {
	case HistTransition:
		return "transition"
	case HistDesired:
		return "desired"
	case HistUnknown:
		return "unknown"
	case HistReconnect:
		return "reconnect"
	case HistLost:
		return "lost"
	}
	return fmt.Sprintf("HistoryKind(%d)", uint8(k))
}
