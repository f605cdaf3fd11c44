package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lni/dragonboat/v4"

	"shoal/cluster"
	"shoal/route"
)

// GroupMembers is one group's voting replicas (ID to Raft address) as
// this replica has applied them.
type GroupMembers = cluster.GroupMembers

// Membership returns every group's members as this replica has applied
// them (no quorum needed; a lagging replica may show an older view).
func (e *Engine) Membership() []GroupMembers {
	out := make([]GroupMembers, e.cfg.Groups+1)
	for g := range out {
		out[g].Group = g
	}
	info := e.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
	if info == nil {
		return out
	}
	for _, si := range info.ShardInfoList {
		g := groupOf(si.ShardID)
		if g < 0 || g > e.cfg.Groups || si.Pending {
			continue
		}
		out[g].Members = maps.Clone(si.Replicas)
		out[g].ConfigChangeIndex = si.ConfigChangeIndex
	}
	return out
}

// Peers returns the replicas of the cluster group (ID to Raft address),
// this one included: the applied membership, or until this replica has
// loaded it, the initial peers it was started with.
func (e *Engine) Peers() map[uint64]string {
	if m := e.Membership()[route.ClusterGroup].Members; len(m) > 0 {
		return m
	}
	return maps.Clone(e.cfg.Peers)
}

// AddReplica adds replica id, reachable for Raft at addr, to the voting
// members of every group (the cluster group first). The new replica then
// starts with Config.Join. It is idempotent: a group that already has id
// at addr is left alone, so a join retried after a lost answer is safe.
// Each group needs a quorum: adding a second replica to a one-replica
// group stalls that group until the new replica runs.
func (e *Engine) AddReplica(ctx context.Context, id uint64, addr string) error {
	if id == 0 {
		return fmt.Errorf("%w: a replica ID is 1 or more", ErrMembership)
	}
	if err := checkAddr("Raft address", addr); err != nil {
		return fmt.Errorf("%w: %w", ErrMembership, err)
	}
	// Refuse conflicts before any group changes.
	view := e.Membership()
	for _, gm := range view {
		if err := addConflict(gm, id, addr); err != nil {
			return err
		}
	}
	// A removed ID is refused by Raft itself; say so plainly when the
	// cluster group can answer (it may not while a member it just gained
	// has not started yet: then the group's refusal speaks).
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	m, err := e.nh.SyncGetShardMembership(c, shardID(route.ClusterGroup))
	cancel()
	if err == nil {
		if _, gone := m.Removed[id]; gone {
			return fmt.Errorf("%w: replica %d was removed from the cluster, and a removed ID can never join again: give the new replica another --id", ErrMembership, id)
		}
	}
	for g := 0; g <= e.cfg.Groups; g++ {
		if err := e.changeGroup(ctx, g, id, addr); err != nil {
			return err
		}
	}
	return nil
}

// addConflict says why id at addr cannot join a group with members gm.
func addConflict(gm GroupMembers, id uint64, addr string) error {
	if a, ok := gm.Members[id]; ok && a != addr {
		return fmt.Errorf("%w: replica %d is already a member, at Raft address %s; give the new replica another --id (or remove replica %d first with `shoal replica rm %d`)",
			ErrMembership, id, a, id, id)
	}
	for other, a := range gm.Members {
		if a == addr && other != id {
			return fmt.Errorf("%w: Raft address %s already belongs to replica %d; remove it first (`shoal replica rm %d`) or give the new replica another --raft-addr",
				ErrMembership, addr, other, other)
		}
	}
	return nil
}

// RemoveReplica removes replica id from the voting members of every group
// (service groups first, the cluster group last). Its ID can never join
// again: a replacement takes a new ID. Removing the last member of a group
// is refused.
func (e *Engine) RemoveReplica(ctx context.Context, id uint64) error {
	view := e.Membership()
	if _, ok := view[route.ClusterGroup].Members[id]; !ok {
		members := slices.Sorted(maps.Keys(view[route.ClusterGroup].Members))
		return fmt.Errorf("%w: replica %d is not a member (members: %v)", ErrNoReplica, id, members)
	}
	for _, gm := range view {
		if _, ok := gm.Members[id]; ok && len(gm.Members) == 1 {
			return fmt.Errorf("%w: replica %d is the only member of group %d; a cluster keeps at least one replica", ErrMembership, id, gm.Group)
		}
	}
	for g := e.cfg.Groups; g >= 0; g-- {
		if err := e.changeGroup(ctx, g, id, ""); err != nil {
			return err
		}
	}
	return nil
}

// changeGroup adds (addr != "") or removes (addr == "") replica id in one
// group, retrying while the group has no leader, until the change is
// applied here or ctx ends.
func (e *Engine) changeGroup(ctx context.Context, g int, id uint64, addr string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.ProposeTimeout)
		defer cancel()
	}
	verb := "add replica"
	if addr == "" {
		verb = "remove replica"
	}
	backoff := e.cfg.RTT
	var last error
	for rejected := 0; ; {
		gm := e.Membership()[g]
		a, member := gm.Members[id]
		switch {
		case addr != "" && member && a == addr, addr == "" && !member && gm.ConfigChangeIndex > 0:
			return nil // done (by an earlier attempt, maybe)
		case addr != "":
			if err := addConflict(gm, id, addr); err != nil {
				return err
			}
		}
		c, cancel := context.WithTimeout(ctx, e.cfg.ProposeTimeout)
		var err error
		if addr != "" {
			err = e.nh.SyncRequestAddReplica(c, shardID(g), id, addr, gm.ConfigChangeIndex)
		} else {
			err = e.nh.SyncRequestDeleteReplica(c, shardID(g), id, gm.ConfigChangeIndex)
		}
		cancel()
		switch {
		case err == nil:
			e.cfg.Logf("engine: group %d: %s %d %s", g, verb, id, addr)
			return nil
		case errors.Is(err, dragonboat.ErrRejected):
			// Raft refused it: a concurrent change, a member already there,
			// or an ID once removed.
			if rejected++; rejected >= 3 {
				return fmt.Errorf("%w: group %d refused to %s %d; an ID that was removed can never join again, so give the new replica another --id",
					ErrMembership, g, verb, id)
			}
		case errors.Is(err, dragonboat.ErrClosed), errors.Is(err, dragonboat.ErrShardClosed):
			return ErrClosed
		case !temporary(err) && !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("engine: group %d: %s %d: %w", g, verb, id, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: group %d: %s %d (last: %w)", ErrNoQuorum, g, verb, id, last)
		case <-e.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, 20*e.cfg.RTT)
	}
}
