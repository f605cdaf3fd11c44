package statemachine

import (
	"errors"
	"fmt"
)

// CmdKind says what a command does.
type CmdKind uint8

// Command kinds. The component that may issue each is fixed: user commands
// come through the API, CmdAssign and CmdPendingReason from the scheduler, CmdTaskStatus from an
// agent, CmdSetNodeStatus/CmdOrphan from the node monitor, and
// CmdReconcile/CmdAllocate/CmdReap are the reactions that Apply runs by itself
// unless Config.ManualReactions is set.
const (
	CmdNop CmdKind = iota
	CmdCreateService
	CmdUpdateService
	CmdRemoveService
	CmdUpsertNode
	CmdRemoveNode
	CmdSetNodeStatus
	CmdSetAvailability
	CmdAssign
	CmdTaskStatus
	CmdOrphan
	CmdReconcile
	CmdAllocate
	CmdReap
	CmdCreateNetwork
	CmdRemoveNetwork
	CmdNodeSync
	CmdTick
	CmdRollbackService
	CmdReserveNodeID
	CmdSetManager
	CmdReserveNetworkID
	CmdPendingReason
	CmdDeliver
	CmdOutboxAck
	CmdRequestBlocks
	CmdReturnBlocks
	CmdGrantBlocks
	CmdReleaseBlocks
	CmdOrphanNode
	CmdSetClusterSettings
	numCmdKinds
)

var cmdNames = [...]string{"nop", "create-service", "update-service", "remove-service",
	"upsert-node", "remove-node", "set-node-status", "set-availability", "assign",
	"task-status", "orphan", "reconcile", "allocate", "reap", "create-network", "remove-network", "node-sync", "tick", "rollback-service", "reserve-node-id", "set-manager", "reserve-network-id", "pending-reason",
	"deliver", "outbox-ack", "request-blocks", "return-blocks", "grant-blocks", "release-blocks", "orphan-node",
	"set-cluster-settings"}

func (k CmdKind) String() string {
	if k < numCmdKinds {
		return cmdNames[k]
	}
	return fmt.Sprintf("CmdKind(%d)", uint8(k))
}

// Command is one change proposed to the state. Which fields matter depends
// on Kind:
//
//	CmdCreateService, CmdUpdateService: Spec; for an update, Seq if not 0
//	                                    is the ModifyIndex the service must
//	                                    still have (compare-and-set)
//	CmdRemoveService, CmdReconcile,
//	CmdRollbackService:                 Name (service name)
//	CmdUpsertNode:                      NodeSpec
//	CmdRemoveNode:                      Node
//	CmdSetNodeStatus:                   Node, NodeStatus
//	CmdSetAvailability:                 Node, Availability
//	CmdAssign:                          Task, Node
//	CmdTaskStatus:                      Task, Node (reporting node), State, ExitCode, Message
//	CmdOrphan, CmdAllocate, CmdReap:    Task
//	CmdOrphanNode:                      Node: its orphan timeout passed (to each service group)
//	CmdCreateNetwork:                   NetworkSpec
//	CmdRemoveNetwork:                   Name (network name)
//	CmdNodeSync:                        Node, Seq (last applied assignment sequence), Tasks (handles still held)
//	CmdTick:                            nothing: an entry that carries the leader's time, so timers fire
//	CmdReserveNodeID:                   Name (optional): the cluster group hands out the next unused node ID (Result.ID); a Name (a joiner's key) given before gets its ID again
//	CmdReserveNetworkID:                nothing: the cluster group hands out the next unused network ID (Result.ID)
//	CmdSetManager:                      Seq (manager replica ID), Name (its API address; "" forgets it)
//	CmdPendingReason:                   Name (service name), Seq (spec version), Message (why its pending
//	                                    tasks of that version stay pending), Tasks (only these; empty: all)
//	CmdSetClusterSettings:              Settings (a field left 0 keeps its value); applied by the cluster
//	                                    group, which carries it to every service group through its outbox
//
// The cross-group re-drive (see outbox.go): the cluster group is the source
// of truth for nodes, networks and address-block leases, and its outbox
// carries each change to every service group.
//
//	CmdDeliver:        Group (the service group), Entry (one outbox entry, applied once, in Seq order)
//	CmdOutboxAck:      Group, Seq (the last outbox entry Group applied): the cluster group trims what all applied
//	CmdRequestBlocks:  Group, Network, Count (addresses wanted), Seq (Group's last applied outbox entry: a fence)
//	CmdReturnBlocks:   to the cluster group: Group, Network, Blocks (released by Group), Seq (fence as above);
//	                   in an outbox entry: the cluster group took Blocks back from Group
//	CmdGrantBlocks:    only in an outbox entry: Blocks of Network leased to Group (none: the network is full, Message says why)
//	CmdReleaseBlocks:  to a service group: give back the empty blocks no waiting task or VIP needs
type Command struct {
	Kind         CmdKind
	State        TaskState
	NodeStatus   NodeStatus
	Availability Availability
	ExitCode     int32
	Node         NodeID
	Task         TaskID
	Seq          uint64
	Tasks        []TaskID
	Name         string
	Message      string
	Spec         *ServiceSpec
	NodeSpec     *Node
	NetworkSpec  *Network
	Settings     *ClusterSettings

	Group   uint16
	Count   uint32
	Network NetworkID
	Blocks  []uint32
	Entry   *OutboxEntry

	// RequestID, if set, names a user's write: applied at most once while
	// the group remembers it (requests.go).
	RequestID string
}

// OutboxEntry is one change the cluster group applied that service groups
// must apply too: Seq numbers entries 1, 2, … in apply order, Index is the
// cluster group's Raft index it was applied at.
type OutboxEntry struct {
	Seq   uint64
	Index uint64
	Cmd   Command
}

// Sentinel errors for rejected commands. A result's Err wraps one of them.
var (
	ErrInvalid        = errors.New("statemachine: invalid command")
	ErrNotFound       = errors.New("statemachine: not found")
	ErrExists         = errors.New("statemachine: already exists")
	ErrWrongComponent = errors.New("statemachine: transition not owned by this component")
	ErrLowerRank      = errors.New("statemachine: transition to a state of lower or equal rank")
	ErrWrongNode      = errors.New("statemachine: task is not on the reporting node")
	ErrNodeNotReady   = errors.New("statemachine: node does not accept task updates")
	ErrNotAllowed     = errors.New("statemachine: not allowed in the current state")
	ErrCorrupt        = errors.New("statemachine: corrupt data")
	// ErrNewerFormat marks data written in a format newer than this build
	// knows (it also matches ErrCorrupt): a replica meeting it in its log
	// must stop rather than skip the entry, or it would part from
	// replicas that can read it.
	ErrNewerFormat = fmt.Errorf("%w: written by a newer version", ErrCorrupt)
	ErrStale       = errors.New("statemachine: changed since the given index")
	ErrExpired     = errors.New("statemachine: deadline passed before the change reached the log")
)

// NewerFormats is how many format numbers past its own a build takes for a
// newer version's (ErrNewerFormat); a number further on is garbage
// (ErrCorrupt).
const NewerFormats = 8

// expiredMsg says why a command of an expired entry was refused.
const expiredMsg = "the change reached the cluster's log after its deadline had passed; it was not applied"

// Code is a result code: which sentinel a rejection wraps. It travels in
// encoded results so errors.Is works on the proposer's side too.
type Code uint8

// Result codes, one per sentinel.
const (
	CodeOK Code = iota
	CodeInvalid
	CodeNotFound
	CodeExists
	CodeWrongComponent
	CodeLowerRank
	CodeWrongNode
	CodeNodeNotReady
	CodeNotAllowed
	CodeCorrupt
	CodeStale
	CodeExpired
	numCodes
)

var codeErrs = [numCodes]error{nil, ErrInvalid, ErrNotFound, ErrExists, ErrWrongComponent,
	ErrLowerRank, ErrWrongNode, ErrNodeNotReady, ErrNotAllowed, ErrCorrupt, ErrStale, ErrExpired}

// Result is the outcome of one command.
type Result struct {
	Code Code
	// Msg says what was wrong (empty on success).
	Msg string
	// ID is the object a command created or acted on (service or task ID).
	ID uint64
}

// Err returns nil on success, else an error wrapping the code's sentinel.
func (r Result) Err() error {
	if r.Code == CodeOK {
		return nil
	}
	base := ErrInvalid
	if r.Code < numCodes {
		base = codeErrs[r.Code]
	}
	return fmt.Errorf("%w: %s", base, r.Msg)
}

func reject(code Code, format string, args ...any) Result {
	return Result{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// EffectKind says what an effect asks the engine to do.
type EffectKind uint8

// Effects that Apply emits for the engine to carry out.
const (
	// EffAssignments: the assignment set of Node changed for Task (it was
	// assigned, its desired state changed, or it was deleted); watchers wake.
	EffAssignments EffectKind = iota
	// EffTaskDeleted: Task was deleted by the reaper.
	EffTaskDeleted
	// EffServiceDeleted: Service was deleted after its last task.
	EffServiceDeleted
	// EffPending: Task became pending and waits for the scheduler.
	EffPending
	// EffSeqAdvanced: Node's assignment sequence advanced because Task
	// became terminal and its addresses went to quarantine. The node learns
	// the new sequence (its syncs are fenced by it); nothing it must do
	// changed, so the task itself is not sent back to it.
	EffSeqAdvanced
	// EffTaskState: Task's observed state changed (it was created, moved by
	// a transition, or got a connectivity marker).
	EffTaskState
	// EffServiceChanged: Service was created, updated, rolled back or
	// flagged for removal.
	EffServiceChanged
	// EffNodeChanged: Node was added, changed status or availability, or
	// was removed.
	EffNodeChanged
	// EffOutbox: the cluster group appended to its outbox; service groups
	// must be sent the new entries.
	EffOutbox
	// EffBlocksWanted: a task or VIP of this service group waits for an
	// address block the cluster group has not leased it yet.
	EffBlocksWanted
	// EffTaskDesired: the desired state of Task, which is on no node,
	// changed (a task on a node gets EffAssignments instead).
	EffTaskDesired
)

// Effect is a consequence of Apply for the outside world, as data.
type Effect struct {
	Kind    EffectKind
	Node    NodeID
	Task    TaskID
	Service ServiceID
}

// Output receives Apply's results (one per command, in order) and effects.
// Reuse one Output across calls to avoid allocation.
type Output struct {
	Results []Result
	Effects []Effect
}

// keptOutput is how many results or effects an Output keeps room for
// between entries: a ramp's biggest batches left tens of MB of effects'
// room on every replica for good.
const keptOutput = 1 << 14

func (o *Output) reset() {
	o.Results = trimmed(o.Results)
	o.Effects = trimmed(o.Effects)
}

// trimmed empties s, dropping its array if it is bigger than keptOutput.
func trimmed[S ~[]E, E any](s S) S {
	if cap(s) > keptOutput {
		return nil
	}
	return s[:0]
}
