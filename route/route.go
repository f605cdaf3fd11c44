package route

import (
	"github.com/cespare/xxhash/v2"

	"shoal/statemachine"
)

// ClusterGroup is the group that holds nodes and networks; service groups
// are numbered 1..N.
const ClusterGroup = 0

// ServiceGroup returns the service group (1..groups) that owns the service
// called name. The hash is stable across builds and machines.
func ServiceGroup(name string, groups int) int {
	return 1 + int(xxhash.Sum64String(name)%uint64(groups))
}

// TaskGroup returns the group encoded in a task ID's top 16 bits.
func TaskGroup(id statemachine.TaskID) int { return int(uint64(id) >> 48) }

// Groups appends to dst the group c goes to. A command that cannot be
// routed gets a rejection (non-OK result) instead.
func Groups(c *statemachine.Command, groups int, dst []int) ([]int, statemachine.Result) {
	switch c.Kind {
	case statemachine.CmdCreateService, statemachine.CmdUpdateService:
		if c.Spec == nil {
			return dst, statemachine.Result{Code: statemachine.CodeInvalid, Msg: c.Kind.String() + " needs a service spec"}
		}
		return append(dst, ServiceGroup(c.Spec.Name, groups)), statemachine.Result{}
	case statemachine.CmdRemoveService, statemachine.CmdReconcile, statemachine.CmdRollbackService,
		statemachine.CmdPendingReason:
		return append(dst, ServiceGroup(c.Name, groups)), statemachine.Result{}
	case statemachine.CmdNodeSync, statemachine.CmdTick, statemachine.CmdOrphanNode:
		// A sync's sequence number and a tick's timers belong to one group;
		// a node's orphaning is sent to each service group.
		return dst, statemachine.Result{Code: statemachine.CodeInvalid,
			Msg: c.Kind.String() + " belongs to one service group: submit it with SubmitToGroup"}
	case statemachine.CmdAssign, statemachine.CmdTaskStatus, statemachine.CmdOrphan,
		statemachine.CmdAllocate, statemachine.CmdReap:
		g := TaskGroup(c.Task)
		if g < 1 || g > groups {
			return dst, statemachine.Result{Code: statemachine.CodeNotFound,
				Msg: "task id names a group this cluster does not have"}
		}
		return append(dst, g), statemachine.Result{}
	case statemachine.CmdDeliver:
		if c.Group < 1 || int(c.Group) > groups {
			return dst, statemachine.Result{Code: statemachine.CodeNotFound,
				Msg: "outbox delivery names a group this cluster does not have"}
		}
		return append(dst, int(c.Group)), statemachine.Result{}
	case statemachine.CmdReleaseBlocks:
		return dst, statemachine.Result{Code: statemachine.CodeInvalid,
			Msg: c.Kind.String() + " belongs to one service group: submit it with SubmitToGroup"}
	}
	// Node and network commands, lease requests and returns, CmdNop and
	// unknown kinds: the cluster group applies (or rejects) them; node and
	// network changes reach the service groups through its outbox.
	return append(dst, ClusterGroup), statemachine.Result{}
}

// PerGroup reports whether a command kind is meaningful per group and so
// is submitted to a group the caller chooses (CmdTick, CmdNop, CmdNodeSync,
// CmdReleaseBlocks, CmdOrphanNode) rather than routed by Groups.
func PerGroup(k statemachine.CmdKind) bool {
	switch k {
	case statemachine.CmdTick, statemachine.CmdNop, statemachine.CmdNodeSync, statemachine.CmdReleaseBlocks,
		statemachine.CmdOrphanNode:
		return true
	}
	return false
}
