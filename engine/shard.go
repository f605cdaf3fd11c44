package engine

// shardID maps a group to its dragonboat shard ID (shard 0 is avoided).
func shardID(group int) uint64 { return uint64(group) + 1 }

// groupOf maps a dragonboat shard ID back to its group.
func groupOf(shard uint64) int { return int(shard) - 1 }
