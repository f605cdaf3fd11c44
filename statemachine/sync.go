package statemachine

import (
	"net/netip"
	"slices"

	"shoal/ipam"
)

// The agent sync protocol (DESIGN.md, "Agent sync"): a node reports the
// assignment sequence it applied and the handles it holds; releases at or
// below that sequence are confirmed and their addresses leave quarantine;
// the answer lists what the agent must destroy. A node down past the
// orphan timeout has its quarantine expired.

// nodeSync is an agent's sync report: it applied its assignment set up to
// seq and still holds the listed tasks. Quarantined addresses it released at
// or before seq and no longer holds are freed.
func (s *State) nodeSync(c *Command) Result {
	n := s.nodes[c.Node]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", c.Node)
	}
	if !n.Status.AcceptsUpdates() {
		return reject(CodeNodeNotReady, "node %d is %s: heartbeat first, then sync", c.Node, n.Status)
	}
	if c.Seq > n.AssignSeq {
		return reject(CodeInvalid, "node %d reports assignment sequence %d, but the newest is %d", c.Node, c.Seq, n.AssignSeq)
	}
	nets := s.quarNets[c.Node]
	if len(nets) == 0 {
		return Result{} // nothing to confirm: no pool would change
	}
	holds := make(map[uint64]struct{}, len(c.Tasks))
	for _, id := range c.Tasks {
		holds[uint64(id)] = struct{}{}
	}
	freed := 0
	for _, id := range nets { // the list is replaced, not changed, as pools empty
		p := s.poolW(id)
		if p == nil {
			continue
		}
		owners := quarantineOwners(p, c.Node)
		addrs := p.ConfirmSync(uint32(c.Node), c.Seq, func(_ netip.Addr, holder uint64) bool {
			_, ok := holds[holder]
			return ok
		})
		s.markReleased(id, addrs, owners)
		s.noteQuarantine(c.Node, id)
		freed += len(addrs)
	}
	if freed > 0 {
		s.retryWaiting = true
	}
	return Result{ID: uint64(freed)}
}

// expireNode frees a down node's quarantine (its orphan timeout passed).
func (s *State) expireNode(id NodeID) {
	nets := s.quarNets[id]
	if len(nets) == 0 {
		return // nothing to expire: no pool would change
	}
	freed := 0
	for _, pid := range nets { // the list is replaced, not changed, as pools empty
		p := s.poolW(pid)
		if p == nil {
			continue
		}
		owners := quarantineOwners(p, id)
		addrs := p.ExpireNode(uint32(id))
		s.markReleased(pid, addrs, owners)
		s.noteQuarantine(id, pid)
		freed += len(addrs)
	}
	if freed > 0 {
		s.retryWaiting = true
	}
}

// quarantineOwners maps each address quarantined on node to the task that
// released it.
func quarantineOwners(p *ipam.Pool, node NodeID) map[netip.Addr]TaskID {
	q := p.Quarantine(uint32(node))
	m := make(map[netip.Addr]TaskID, len(q))
	for _, e := range q {
		m[e.Addr] = TaskID(e.Holder)
	}
	return m
}

// markReleased records on each task that its freed address is no longer its.
func (s *State) markReleased(nw NetworkID, addrs []netip.Addr, owners map[netip.Addr]TaskID) {
	for _, a := range addrs {
		t := s.tasks.get(owners[a])
		if t == nil {
			continue // already deleted
		}
		for i := range t.Attachments {
			if at := &t.Attachments[i]; at.Network == nw && at.Addr == addrU32(a) {
				s.keepTask(t)
				at.Released = true
			}
		}
	}
}

// SyncNeedsCommit reports whether a node's sync report at assignment
// sequence seq must go through CmdNodeSync in this group. It need not when
// the command would change nothing and the state already answers for the
// node: the node is ready or initializing, this state has applied its
// assignments up to seq at least (so it knows every task the node holds
// from them), and no pool holds an address in quarantine on the node.
// Syncs are most of an agent fleet's traffic, and during a ramp, when
// nothing is released, they were Raft commands in every group that
// changed nothing: at 10,000 agents, thousands of them waited in the
// proposers ahead of the service creates.
func (s *State) SyncNeedsCommit(node NodeID, seq uint64) bool {
	n := s.nodes[node]
	if n == nil || !n.Status.AcceptsUpdates() || seq > n.AssignSeq {
		return true
	}
	return len(s.quarNets[node]) > 0
}

// SyncAnswer is the manager's answer to a node's sync report (DESIGN.md,
// "Agent sync"): of the handles the node says it holds, the ones it must
// destroy — tasks the manager does not know (deleted, or never this
// group's), tasks assigned to another node, and tasks whose desired state is
// shutdown or remove — in ascending order. It reads the state only; the
// releases the report confirms are applied by CmdNodeSync, fenced by its
// sequence number.
func (s *State) SyncAnswer(node NodeID, holds []TaskID) []TaskID {
	var destroy []TaskID
	for _, id := range holds {
		t := s.tasks.get(id)
		if t == nil || t.Node != node || t.Desired.Stopping() {
			destroy = append(destroy, id)
		}
	}
	slices.Sort(destroy)
	return slices.Compact(destroy)
}
