package statemachine

import (
	"maps"
	"slices"
)

// The cross-group re-drive. The cluster group (0) is the source of truth
// for nodes, networks and address-block leases. Every such change it
// applies is appended to its outbox, a replicated list of entries numbered
// 1, 2, … (Seq) that remember the Raft index they were applied at. The
// cluster group leader's duty sends every entry a service group has not
// applied yet as CmdDeliver, in order; a service group applies entry Seq
// only when it has applied Seq-1 (a replay or a duplicate changes nothing)
// and records the last Seq it applied. The duty reports that back
// (CmdOutboxAck) and the cluster group drops the entries every group has
// applied. A crash or a leader change between the cluster group and a
// service group thus delays an entry, never loses it: the next leader's
// duty finds it in the outbox and sends it again.
//
// Block leases travel the same way (lease.go): a service group's need is
// read from its state and sent as CmdRequestBlocks; the cluster group
// grants in its own state and the grant reaches the group as an outbox
// entry; a group gives back empty blocks by releasing them in its own state
// first (CmdReleaseBlocks), then the duty sends CmdReturnBlocks.

// outbox is the cluster group's side.
type outbox struct {
	entries []OutboxEntry // Seq ascending, contiguous, ending at next-1
	next    uint64        // Seq of the next entry; entries below it that are gone were applied everywhere
	// acks[g] is the last Seq service group g (1..Groups) is known to have
	// applied; index 0 is unused.
	acks []uint64
	// netGrant holds, per (group, network), the Seq of the newest grant
	// (or refusal) of that network's blocks sent to the group. A request or
	// return of that network computed before the group applied it is
	// stale; other networks' are not (one fence per group let one network
	// per group through per re-drive round: a 100k ramp's tasks waited
	// minutes for blocks).
	netGrant map[leaseKey]uint64
	// lastGrant[g] is a floor kept from a snapshot of format 3, which had
	// one fence per group: what g computed before it stays stale. Zero in
	// a state that began with format 4.
	lastGrant []uint64
	// refused marks (group, network) pairs told the network is full, so a
	// repeated request does not repeat the answer; cleared when a block of
	// the network comes back.
	refused map[leaseKey]struct{}
}

type leaseKey struct {
	group   uint16
	network NetworkID
}

// inbox is a service group's side.
type inbox struct {
	applied uint64 // Seq of the last outbox entry applied
	index   uint64 // the cluster group's index of that entry
	// returning lists blocks this group released and the cluster group has
	// not confirmed taking back yet, by network.
	returning map[NetworkID][]uint32
	// full holds, by network, why the cluster group refused this group a
	// block (the network is full), until it grants one.
	full map[NetworkID]string
	// wanted is set while Apply finds a task or VIP waiting for a block:
	// scratch, to emit EffBlocksWanted once per entry.
	wanted bool
}

func newOutbox(groups int) outbox {
	return outbox{next: 1, acks: make([]uint64, groups+1), lastGrant: make([]uint64, groups+1),
		netGrant: map[leaseKey]uint64{}, refused: map[leaseKey]struct{}{}}
}

func newInbox() inbox {
	return inbox{returning: map[NetworkID][]uint32{}, full: map[NetworkID]string{}}
}

// outboxKind reports whether the cluster group hands a command of kind k
// to every service group through its outbox.
func outboxKind(k CmdKind) bool {
	switch k {
	case CmdUpsertNode, CmdRemoveNode, CmdSetNodeStatus, CmdSetAvailability, CmdCreateNetwork, CmdRemoveNetwork,
		CmdSetClusterSettings:
		return true
	}
	return false
}

// OutboxKind reports whether a command of kind k is applied by the cluster
// group alone and reaches service groups through its outbox.
func OutboxKind(k CmdKind) bool { return outboxKind(k) }

// appendOutbox records c for every service group.
func (s *State) appendOutbox(c Command) uint64 {
	c.Entry, c.RequestID = nil, "" // the cluster group records the request
	if c.NodeSpec != nil {
		n := *c.NodeSpec
		n.tasks, n.Labels = nil, maps.Clone(n.Labels)
		c.NodeSpec = &n
	}
	if c.NetworkSpec != nil {
		nw := *c.NetworkSpec
		nw.Reserved = slices.Clone(nw.Reserved)
		c.NetworkSpec = &nw
	}
	if c.Settings != nil {
		cs := *c.Settings
		c.Settings = &cs
	}
	c.Blocks = slices.Clone(c.Blocks)
	seq := s.ob.next
	s.ob.next++
	s.ob.entries = append(s.ob.entries, OutboxEntry{Seq: seq, Index: s.index, Cmd: c})
	s.emit(Effect{Kind: EffOutbox})
	return seq
}

// applyCluster applies a node, network or settings command in the cluster
// group and, if it changed anything, appends it to the outbox.
func (s *State) applyCluster(c *Command) Result {
	var before NodeStatus
	if c.Kind == CmdSetNodeStatus {
		if n := s.nodes[c.Node]; n != nil {
			before = n.Status
		}
	}
	r := s.applyObject(c)
	if r.Code != CodeOK || (c.Kind == CmdSetNodeStatus && before == c.NodeStatus) {
		return r
	}
	if c.Kind == CmdRemoveNetwork {
		for k := range s.ob.refused {
			if k.network == NetworkID(r.ID) {
				delete(s.ob.refused, k)
			}
		}
	}
	s.appendOutbox(*c)
	return r
}

// applyObject applies a node, network or settings command to this group.
func (s *State) applyObject(c *Command) Result {
	switch c.Kind {
	case CmdUpsertNode:
		return s.upsertNode(c.NodeSpec)
	case CmdRemoveNode:
		return s.removeNode(c.Node)
	case CmdSetNodeStatus:
		return s.setNodeStatus(c.Node, c.NodeStatus)
	case CmdSetAvailability:
		return s.setAvailability(c.Node, c.Availability)
	case CmdCreateNetwork:
		return s.createNetwork(c.NetworkSpec)
	case CmdRemoveNetwork:
		return s.removeNetwork(c.Name)
	case CmdSetClusterSettings:
		return s.setClusterSettings(c)
	}
	return reject(CodeInvalid, "%s is not a node, network or settings command", c.Kind)
}

// outboxAck records that service group g applied the outbox up to seq and
// drops the entries every group has applied.
func (s *State) outboxAck(g uint16, seq uint64) Result {
	if s.cfg.Group != 0 {
		return reject(CodeInvalid, "outbox acknowledgements go to the cluster group")
	}
	if g == 0 || int(g) >= len(s.ob.acks) {
		return reject(CodeInvalid, "group %d is not a service group of this cluster (1..%d)", g, len(s.ob.acks)-1)
	}
	if seq >= s.ob.next {
		return reject(CodeInvalid, "group %d acknowledges outbox entry %d, which does not exist yet (next is %d)", g, seq, s.ob.next)
	}
	s.ob.acks[g] = max(s.ob.acks[g], seq)
	low := s.ob.acks[1]
	for _, a := range s.ob.acks[1:] {
		low = min(low, a)
	}
	i := 0
	for i < len(s.ob.entries) && s.ob.entries[i].Seq <= low {
		i++
	}
	if i > 0 {
		s.ob.entries = slices.Delete(s.ob.entries, 0, i)
	}
	return Result{ID: seq}
}

// deliver applies one outbox entry in a service group, exactly once and in
// order.
func (s *State) deliver(c *Command) Result {
	if s.cfg.Group == 0 || c.Group != s.cfg.Group {
		return reject(CodeInvalid, "outbox entry for group %d delivered to group %d", c.Group, s.cfg.Group)
	}
	e := c.Entry
	if e == nil || e.Seq == 0 {
		return reject(CodeInvalid, "delivery without an outbox entry")
	}
	switch {
	case e.Seq <= s.in.applied:
		return Result{ID: e.Seq, Msg: "already applied"}
	case e.Seq > s.in.applied+1:
		return reject(CodeNotAllowed, "outbox entry %d arrived before entry %d; it is sent again in order", e.Seq, s.in.applied+1)
	}
	s.in.applied, s.in.index = e.Seq, e.Index
	inner := &e.Cmd
	var r Result
	switch inner.Kind {
	case CmdGrantBlocks:
		r = s.installGrant(inner)
	case CmdReturnBlocks:
		r = s.confirmReturn(inner)
	case CmdRemoveNode:
		r = s.removeNodeDelivered(inner.Node)
	case CmdRemoveNetwork:
		r = s.removeNetworkDelivered(inner.Name)
	default:
		r = s.applyObject(inner)
	}
	if r.Code != CodeOK {
		// The cluster group applied it; this group follows whatever it
		// decided, so a refusal here is reported, not retried.
		return Result{ID: e.Seq, Msg: "outbox entry " + inner.Kind.String() + " refused here: " + r.Msg}
	}
	return Result{ID: e.Seq}
}

// removeNodeDelivered removes a node the cluster group removed. The
// cluster group required it down; if a task here was not orphaned yet (the
// removal raced a check made before it), it is orphaned now: its node is
// down for good and can never report again.
func (s *State) removeNodeDelivered(id NodeID) Result {
	if n := s.nodes[id]; n != nil && n.Status == NodeDown {
		for _, t := range s.NodeTasks(id) {
			if !t.Status.State.Terminal() && CanTransition(CompNodeMonitor, t.Status.State, StateOrphaned) {
				s.orphan(t.ID)
			}
		}
	}
	return s.removeNode(id)
}

// removeNetworkDelivered removes a network the cluster group removed (no
// block of it was leased, so this group holds none of its addresses). A
// service that still names it (created while the removal was on its way)
// keeps the name; its tasks then say the network does not exist.
func (s *State) removeNetworkDelivered(name string) Result {
	nw := s.networkByName(name)
	if nw == nil {
		return reject(CodeNotFound, "network %q does not exist", name)
	}
	if p := s.pools[nw.ID]; p != nil && (p.Held() > 0 || p.Quarantined() > 0) {
		return reject(CodeNotAllowed, "network %q still has %d held and %d quarantined addresses here", name, p.Held(), p.Quarantined())
	}
	delete(s.networks, nw.ID)
	delete(s.networkNames, nw.Name)
	s.deletePool(nw.ID)
	delete(s.in.full, nw.ID)
	delete(s.in.returning, nw.ID)
	return Result{ID: uint64(nw.ID)}
}

// Outbox returns a copy of the cluster group's outbox entries with Seq
// above after, oldest first.
func (s *State) Outbox(after uint64) []OutboxEntry {
	i, _ := slices.BinarySearchFunc(s.ob.entries, after+1, func(e OutboxEntry, seq uint64) int {
		switch {
		case e.Seq < seq:
			return -1
		case e.Seq > seq:
			return 1
		}
		return 0
	})
	return slices.Clone(s.ob.entries[i:])
}

// OutboxNext is the Seq the cluster group's next outbox entry will get.
func (s *State) OutboxNext() uint64 { return s.ob.next }

// OutboxAcked returns the last outbox Seq the cluster group knows service
// group g applied.
func (s *State) OutboxAcked(g int) uint64 {
	if g <= 0 || g >= len(s.ob.acks) {
		return 0
	}
	return s.ob.acks[g]
}

// OutboxApplied returns the Seq of the last outbox entry this service
// group applied and the cluster group's index it was applied at there.
func (s *State) OutboxApplied() (seq, clusterIndex uint64) { return s.in.applied, s.in.index }

// CheckRemoval says whether this service group can follow the removal of a
// node (it has no live task there) or a network (no service of it uses
// it, no address of it is held or quarantined here). Other commands pass.
func (s *State) CheckRemoval(c *Command) Result {
	switch c.Kind {
	case CmdRemoveNode:
		n := s.nodes[c.Node]
		if n == nil {
			return Result{}
		}
		for _, t := range s.NodeTasks(c.Node) {
			if !t.Status.State.Terminal() {
				return liveTaskOnNode(c.Node, t)
			}
		}
	case CmdRemoveNetwork:
		nw := s.networkByName(c.Name)
		if nw == nil {
			return Result{}
		}
		for _, id := range s.ServiceIDs() {
			if slices.Contains(s.services[id].Spec.Networks, c.Name) {
				return reject(CodeNotAllowed, "network %q is used by service %q; remove or update it first", c.Name, s.services[id].Spec.Name)
			}
		}
		if p := s.pools[nw.ID]; p != nil && (p.Held() > 0 || p.Quarantined() > 0) {
			return reject(CodeNotAllowed, "network %q still has %d held and %d quarantined addresses; wait until tasks are gone and their nodes have synced",
				c.Name, p.Held(), p.Quarantined())
		}
	}
	return Result{}
}
