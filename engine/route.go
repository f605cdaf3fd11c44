package engine

import (
	"shoal/engine/route"
	"shoal/statemachine"
)

// ClusterGroup is the group that holds nodes and networks; service groups
// are numbered 1..N.
const ClusterGroup = route.ClusterGroup

// ServiceGroup returns the service group (1..groups) that owns the service
// called name. The hash is stable across builds and machines.
func ServiceGroup(name string, groups int) int { return route.ServiceGroup(name, groups) }

// TaskGroup returns the group encoded in a task ID's top 16 bits.
func TaskGroup(id statemachine.TaskID) int { return route.TaskGroup(id) }

// shardID maps a group to its dragonboat shard ID (shard 0 is avoided).
func shardID(group int) uint64 { return uint64(group) + 1 }

// groupOf maps a dragonboat shard ID back to its group.
func groupOf(shard uint64) int { return int(shard) - 1 }
