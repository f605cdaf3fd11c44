package sched

import "strconv"

// NodeStatus is a node's connection status. Only StatusReady nodes take
// new tasks.
type NodeStatus uint8

// Node statuses, as in DESIGN.md ("Disconnects and reconnects").
const (
	StatusUnknown NodeStatus = iota
	StatusReady
	StatusInitializing
	StatusDisconnected
	StatusDown
)

func (s NodeStatus) String() string {
	switch s {
	case StatusUnknown:
		return "unknown"
	case StatusReady:
		return "ready"
	case StatusInitializing:
		return "initializing"
	case StatusDisconnected:
		return "disconnected"
	case StatusDown:
		return "down"
	}
	return "NodeStatus(" + strconv.Itoa(int(s)) + ")"
}

// Availability is the operator's wish for a node. Only AvailabilityActive
// nodes take new tasks. The zero value is active.
type Availability uint8

// Node availabilities, as in SwarmKit.
const (
	AvailabilityActive Availability = iota
	AvailabilityPause
	AvailabilityDrain
)

func (a Availability) String() string {
	switch a {
	case AvailabilityActive:
		return "active"
	case AvailabilityPause:
		return "pause"
	case AvailabilityDrain:
		return "drain"
	}
	return "Availability(" + strconv.Itoa(int(a)) + ")"
}

// Role is a node's role in the cluster. The zero value is worker.
type Role uint8

// Node roles.
const (
	RoleWorker Role = iota
	RoleManager
)

func (r Role) String() string {
	switch r {
	case RoleWorker:
		return "worker"
	case RoleManager:
		return "manager"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Strategy chooses how a group's tasks are spread over the eligible nodes of
// one preference branch. The zero value is Spread.
type Strategy uint8

const (
	// Spread puts each task on the node with the fewest tasks of the same
	// service, then the fewest tasks in total (SwarmKit's order).
	Spread Strategy = iota
	// BinPack fills the most-loaded node (largest share of its CPU or
	// memory reserved) first, as far as the task fits, then the next.
	BinPack
)

func (s Strategy) String() string {
	switch s {
	case Spread:
		return "spread"
	case BinPack:
		return "binpack"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// Reason says why a node cannot take (one more) task of a group. A node is
// counted under the first reason that applies, in this order.
type Reason uint8

// Reasons, in pipeline order.
const (
	ReasonNone       Reason = iota
	ReasonNotReady          // status is not ready
	ReasonPaused            // availability is pause
	ReasonDrained           // availability is drain
	ReasonConstraint        // a placement constraint does not match
	ReasonCPU               // free CPU is below the task's reservation
	ReasonMemory            // free memory is below the task's reservation
	ReasonMaxPerNode        // the node already runs MaxPerNode tasks of the service
)

func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonNotReady:
		return "not ready"
	case ReasonPaused:
		return "paused"
	case ReasonDrained:
		return "drained"
	case ReasonConstraint:
		return "constraint not satisfied"
	case ReasonCPU:
		return "insufficient CPU"
	case ReasonMemory:
		return "insufficient memory"
	case ReasonMaxPerNode:
		return "max replicas per node reached"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}
