package check

import (
	"fmt"
	"time"

	"shoal/api/client"
)

// held-aside: a node back from a disconnect is initializing until it has
// re-reported its tasks; its tasks that still run are held aside until
// then, and the reconnect (original or replacement) is decided on the
// re-reported facts (shared/DESIGN.md, "Disconnects and reconnects").
// The event stream shows it: a task running on a node whose event in the
// same entry rendered it initializing gets desired shutdown in that entry
// only when the cluster decided before the re-report. (A user's removal
// or scale-down asks remove, not shutdown; a window that ends, or a node
// that goes down, stops tasks while the node is away, not as it comes
// back.) Only tasks of services with a disconnect window are held
// aside: a service without one has its tasks replaced and stopped as on a
// down node the moment their node is disconnected, and when that
// disconnect and the heartbeat that ends it are applied in one entry (a
// busy leader batches them), the stop shares the entry that renders the
// node initializing without any reconnect having been decided.
//
// The stream renders objects as the replica has them when it sends them,
// not as of their entry: an entry's node may show a status a later entry
// set. Such an entry is told by the later entry's event, rendered with
// the same status since the same time; a suspect is counted only once the
// node's next event shows it changed since (or at quiescence, when no
// later event came).

// nodeKey is a node as one group renders it (each group applies the node
// monitor's statuses in its own order).
type nodeKey struct {
	group int
	node  uint32
}

// nodeSeen is a node's last rendering in the event stream.
type nodeSeen struct {
	status string
	since  time.Time
	raft   uint64 // the entry whose event carried it
}

// asideSuspect is a task stopped in the entry that rendered its node
// initializing, waiting for the node's next event.
type asideSuspect struct {
	key  nodeKey
	seen nodeSeen
	msg  string
	objs []string
}

// nodeEventLocked takes one node event: it settles the suspects on that
// node and keeps the rendering.
func (c *Checker) nodeEventLocked(ev client.Event, now time.Time) {
	id := ev.Node
	if id == nil {
		return
	}
	k := nodeKey{ev.Group, id.ID}
	seen := nodeSeen{status: id.Status, since: id.StatusSince, raft: ev.Raft}
	kept := c.mu.aside[:0]
	for _, s := range c.mu.aside {
		switch {
		case s.key != k || s.seen.raft >= ev.Raft:
			kept = append(kept, s)
		case s.seen.status == seen.status && s.seen.since.Equal(seen.since):
			// The suspect's entry was rendered after this later one: its
			// node's status then is not known.
		default:
			c.violateLocked(now, HeldAside, s.msg, s.objs...)
		}
	}
	c.mu.aside = kept
	c.mu.nodes[k] = seen
}

// serviceEventLocked keeps whether a service has a disconnect window, as
// its last rendering says. (A deleted service's event carries no name, only
// its key: its entry stays until a service of that name is rendered again.)
func (c *Checker) serviceEventLocked(ev client.Event) {
	if sv := ev.Service; sv != nil {
		c.mu.windowed[sv.Spec.Name] = sv.Spec.Disconnect != nil && sv.Spec.Disconnect.LostAfter > 0
	}
}

// desiredLocked looks at a task whose desired state the stream shows
// moving from was to t.Desired in entry raft of group.
func (c *Checker) desiredLocked(id uint64, was string, t *client.Task, group int, raft uint64) {
	if was != "running" || t.Desired != "shutdown" || !c.mu.windowed[t.Service] {
		return
	}
	c.mu.checked[ixHeldAside]++
	n, ok := c.mu.nodes[nodeKey{group, t.Node}]
	if !ok || n.raft != raft || n.status != "initializing" || t.State != "running" || !t.Since.Before(n.since) {
		return
	}
	c.mu.aside = append(c.mu.aside, asideSuspect{key: nodeKey{group, t.Node}, seen: n,
		msg: fmt.Sprintf("task %d was stopped while still running on node %d, which was back from a disconnect but had not re-reported its tasks (initializing since %s): a reconnect decided on stale facts",
			id, t.Node, n.since.Sub(c.mu.start).Round(time.Millisecond)),
		objs: []string{fmt.Sprintf("task %d %s.%d node=%d desired=%s state=%s (group %d, entry %d)", id, t.Service, t.Slot, t.Node, t.Desired, t.State, group, raft)}})
}

// settleAsideLocked counts the suspects no later node event cleared (at
// quiescence: the stream caught up, so none is coming).
func (c *Checker) settleAsideLocked(now time.Time) {
	for _, s := range c.mu.aside {
		c.violateLocked(now, HeldAside, s.msg, s.objs...)
	}
	c.mu.aside = nil
}
