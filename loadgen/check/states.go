package check

// The observed task states in rank order (shared/DESIGN.md).
var stateRank = map[string]int{
	"new": 0, "pending": 1, "assigned": 2, "accepted": 3, "preparing": 4, "ready": 5,
	"starting": 6, "running": 7, "complete": 8, "shutdown": 9, "failed": 10, "rejected": 11, "orphaned": 12,
}

const (
	rankPending  = 1
	rankAssigned = 2
	rankRunning  = 7
	rankComplete = 8 // the first terminal rank
	rankRejected = 11
)

// States lists the observed states in rank order.
var States = []string{"new", "pending", "assigned", "accepted", "preparing", "ready", "starting", "running",
	"complete", "shutdown", "failed", "rejected", "orphaned"}

// Invariant names.
const (
	AddressAgents = "address-agents"
	AddressLive   = "address-live"
	NoVanish      = "no-vanish"
	Monotone      = "monotone"
	TaskShape     = "task-shape"
	OwnNode       = "own-node"
	OnePerSlot    = "one-per-slot"
	AsDesired     = "as-desired"
	ReplicasAgree = "replicas-agree"
	HeldAside     = "held-aside"
)

// The invariants' places in Names (the checker counts its checks in an
// array: a map keyed by the names was a tenth of its time per event).
const (
	ixAddressAgents = iota
	ixAddressLive
	ixNoVanish
	ixMonotone
	ixTaskShape
	ixOwnNode
	ixOnePerSlot
	ixAsDesired
	ixReplicasAgree
	ixHeldAside
	nInvariants
)

// Names lists every invariant with its one-sentence statement.
var Names = []struct{ Name, Description string }{
	{AddressAgents, "no address is held by two tasks at once on the agents"},
	{AddressLive, "no address is attached to two tasks that are both not terminal"},
	{NoVanish, "a task is deleted only once terminal, or before it was ever assigned"},
	{Monotone, "a task's observed state never moves to a lower rank"},
	{TaskShape, "a task at or past assigned has a node unless rejected; every observed state is known"},
	{OwnNode, "an agent is handed only tasks of its own node"},
	{OnePerSlot, "at quiescence, at most one running task per slot"},
	{AsDesired, "at quiescence, every service has exactly its desired running count"},
	{ReplicasAgree, "at quiescence, replicas at the same applied index hold the same state (group hashes)"},
	{HeldAside, "a task still running on a node back from a disconnect is not stopped before the node re-reported its tasks"},
}
