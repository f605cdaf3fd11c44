package engine

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

// route appends to dst the groups cmd goes to, in order (the cluster group
// first for fanned-out commands). A command that cannot be routed gets a
// rejection (non-OK result) instead.
func route(c *statemachine.Command, groups int, dst []int) ([]int, statemachine.Result) {
	switch c.Kind {
	case statemachine.CmdCreateService, statemachine.CmdUpdateService:
		if c.Spec == nil {
			return dst, statemachine.Result{Code: statemachine.CodeInvalid, Msg: c.Kind.String() + " needs a service spec"}
		}
		return append(dst, ServiceGroup(c.Spec.Name, groups)), statemachine.Result{}
	case statemachine.CmdRemoveService, statemachine.CmdReconcile, statemachine.CmdRollbackService:
		return append(dst, ServiceGroup(c.Name, groups)), statemachine.Result{}
	case statemachine.CmdNodeSync, statemachine.CmdTick:
		// A sync's sequence number and a tick's timers belong to one group.
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
	case statemachine.CmdUpsertNode, statemachine.CmdRemoveNode, statemachine.CmdSetNodeStatus,
		statemachine.CmdSetAvailability, statemachine.CmdCreateNetwork, statemachine.CmdRemoveNetwork:
		// Service groups hold mirrors of nodes and networks: they check
		// agent updates and service networks without crossing groups.
		for g := 0; g <= groups; g++ {
			dst = append(dst, g)
		}
		return dst, statemachine.Result{}
	}
	// CmdNop and unknown kinds: the cluster group applies (or rejects) them.
	return append(dst, ClusterGroup), statemachine.Result{}
}

// shardID maps a group to its dragonboat shard ID (shard 0 is avoided).
func shardID(group int) uint64 { return uint64(group) + 1 }

// groupOf maps a dragonboat shard ID back to its group.
func groupOf(shard uint64) int { return int(shard) - 1 }
