package check

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/api/client"
	"shoal/loadgen/report"
)

// maxKept is how many violations are kept with their details.
const maxKept = 100

// view is what the event stream showed of one task.
type view struct {
	service string
	slot    uint32
	node    uint32
	desired string
	rank    int
	conn    int      // the stream connection of the last merged object
	live    []addrID // addresses held while not terminal
	stale   bool     // a later event came without an object: the task was gone when rendered
	// addrs are the task's addresses as last rendered (for describing
	// it): the decoded object's own slice, not a copy of the object.
	addrs  []client.TaskAddress
	timing Timing // the statistics' (OnTiming)
	// handedTo is handed's entry for the task while handedOK (kept here
	// too, so that merging an event does not read handed again).
	handedTo uint32
	handedOK bool
}

// Timing is what the loadgen's statistics keep of a task, kept in the
// checker's view of it: an event then reaches one table per task instead
// of two (each touch of a table of a million tasks was a cache miss, and
// the statistics' own map was a tenth of the stream reader's CPU).
type Timing struct {
	Created, Assigned int64 // unix ms; 0: not seen
	Done              bool
}

// TimingFunc is handed each rendering of a task in the view (every event
// of it with an object, older renderings too), with the task's Timing to
// update in place, and whether the task has just entered the view. It
// runs under the checker's lock and must not call the checker.
type TimingFunc func(t *client.Task, tm *Timing, first bool)

// holder is a task holding an address on an agent.
type holder struct {
	node uint32
	task uint64
	at   int64 // when the agent prepared or started it (unix ns: no pointer for the collector to follow)
}

// agentRec is what the agents told of a task: whom it was handed to and
// the addresses it holds. One table of them, with nothing in it for the
// collector to scan (a task's second and further addresses are in
// heldMore), instead of a table of hand-overs and one of address lists:
// each was a cold probe per observation on a million entries, and the
// second a million slices to scan at every collection.
type agentRec struct {
	first    addrID // the first address it holds, when n > 0
	n        uint32 // how many addresses it holds (all of them in heldMore when more than one)
	handedTo uint32 // the node whose agent got it, when handedOK
	handedOK bool
	holds    bool // an agent holds the task's addresses (n of them)
}

// Probe says what the agent of node keeps in its store for task: a
// second opinion on a conflict, to tell a double hold on the nodes from
// a release the checker missed. It must take no lock but the store's.
type Probe func(node uint32, task uint64) string

// Checker checks the invariants; see the package doc.
type Checker struct {
	mu struct {
		sync.Mutex
		start time.Time
		tasks map[uint64]*view
		// byState counts tasks by rank (index as in States), kept as
		// views change: counting a million-task view on every progress
		// tick was a fifth of the loadgen's CPU.
		byState  []int
		addrs    addrTable           // numbers the addresses' networks (addrs.go)
		liveAddr map[addrID]uint64   // address → task (stream view, non-terminal)
		agentAdr map[addrID]holder   // address → holder (agents)
		agents   map[uint64]agentRec // task → what its agents told (hand-over, hold)
		heldMore map[uint64][]addrID // task → the addresses it holds, when more than one
		checked  [nInvariants]int64  // per invariant, as ordered in Names
		count    map[string]int
		kept     []report.Violation
		// own, when set, says which services' tasks the stream's view
		// keeps (a cluster the loadgen joined runs its owner's too).
		own func(service string) bool
		// suspects are address-live conflicts seen in the stream's view,
		// waiting to be confirmed against the replicated state (Suspects).
		suspects []Suspect
		// released is, per address, the last holder the agents let go of.
		released map[addrID]holder
		probe    Probe
		// nodes is each node as the stream last rendered it, per group;
		// aside the held-aside suspects (aside.go).
		nodes map[nodeKey]nodeSeen
		aside []asideSuspect
		// windowed holds the services whose last rendering gave them a
		// disconnect window: only their tasks are held aside (aside.go).
		windowed map[string]bool
		timing   TimingFunc
	}
}

// OnTiming installs the statistics' TimingFunc (call it before the first
// event).
func (c *Checker) OnTiming(f TimingFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.timing = f
}

// SetProbe installs the agents' store probe for address-agents conflicts.
func (c *Checker) SetProbe(p Probe) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.probe = p
}

// New returns a checker; times in violations count from start.
func New(start time.Time) *Checker {
	c := &Checker{}
	c.mu.start = start
	c.mu.tasks = map[uint64]*view{}
	c.mu.byState = make([]int, len(States))
	c.mu.liveAddr = map[addrID]uint64{}
	c.mu.agentAdr = map[addrID]holder{}
	c.mu.agents = map[uint64]agentRec{}
	c.mu.heldMore = map[uint64][]addrID{}
	c.mu.count = map[string]int{}
	c.mu.released = map[addrID]holder{}
	c.mu.nodes = map[nodeKey]nodeSeen{}
	c.mu.windowed = map[string]bool{}
	return c
}

// Expect sizes the checker's tables for a run of about tasks tasks (call
// it before the first event): growing them a step at a time while the
// stream's reader waited was a few per cent of its time in a ramp.
func (c *Checker) Expect(tasks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.tasks) > 0 || tasks <= 0 {
		return
	}
	c.mu.tasks = make(map[uint64]*view, tasks)
	c.mu.liveAddr = make(map[addrID]uint64, tasks)
	c.mu.agentAdr = make(map[addrID]holder, tasks)
	c.mu.agents = make(map[uint64]agentRec, tasks)
}

// Only makes the stream's view keep the tasks of the services own accepts
// and ignore the rest (call it before the first event). A run against a
// cluster it joined checks its own services, not its owner's.
func (c *Checker) Only(own func(service string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.own = own
}

// addrKey names an address on a network, without its prefix length.
func addrKey(network, addr string) string {
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	return network + " " + addr
}

func (c *Checker) violateLocked(now time.Time, inv, msg string, objs ...string) {
	c.mu.count[inv]++
	if len(c.mu.kept) < maxKept {
		c.mu.kept = append(c.mu.kept, report.Violation{Invariant: inv, AtSeconds: now.Sub(c.mu.start).Seconds(),
			Message: msg, Objects: objs})
	}
}

func describe(id uint64, v *view) string {
	if v == nil {
		return fmt.Sprintf("task %d (not seen in the event stream)", id)
	}
	s := fmt.Sprintf("task %d %s.%d node=%d desired=%s state=%s", id, v.service, v.slot, v.node, v.desired, States[v.rank])
	if len(v.addrs) > 0 {
		var as []string
		for _, a := range v.addrs {
			r := ""
			if a.Released {
				r = "(released)"
			}
			as = append(as, a.Network+":"+a.Addr+r)
		}
		s += " addresses=" + strings.Join(as, ",")
	}
	return s
}

// Event feeds one event-stream event, received on stream connection conn
// (a number that changes at every reconnect), at now.
func (c *Checker) Event(ev client.Event, conn int, now time.Time) {
	if ev.Topic == "node" {
		c.mu.Lock()
		c.nodeEventLocked(ev, now)
		c.mu.Unlock()
		return
	}
	if ev.Topic == "service" {
		c.mu.Lock()
		c.serviceEventLocked(ev)
		c.mu.Unlock()
		return
	}
	if ev.Topic != "task" {
		return
	}
	id, err := strconv.ParseUint(ev.Key, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Type == "deleted" {
		c.deletedLocked(id, now)
		return
	}
	v := c.mu.tasks[id]
	if ev.Task == nil {
		if v != nil {
			v.stale = true
		}
		return
	}
	was := ""
	if v != nil && v.conn == conn {
		was = v.desired
	}
	first := v == nil
	v, merged := c.mergeLocked(id, v, ev.Task, conn, now)
	if merged {
		c.desiredLocked(id, was, ev.Task, ev.Group, ev.Raft)
	}
	if v != nil && c.mu.timing != nil {
		c.mu.timing(ev.Task, &v.timing, first)
	}
}

func (c *Checker) deletedLocked(id uint64, now time.Time) {
	v := c.mu.tasks[id]
	c.mu.checked[ixNoVanish]++
	if v != nil && !v.stale && v.rank >= rankAssigned && v.rank < rankComplete {
		c.violateLocked(now, NoVanish, fmt.Sprintf("task %d was deleted while %s on node %d (desired %s)",
			id, States[v.rank], v.node, v.desired), describe(id, v))
	}
	if v != nil {
		c.setLiveLocked(id, v, nil, now)
		c.setRankLocked(v, -1)
	}
	delete(c.mu.tasks, id)
	if r, ok := c.mu.agents[id]; ok && r.handedOK {
		r.handedTo, r.handedOK = 0, false
		c.putAgentLocked(id, r)
	}
}

// mergeLocked merges a rendered task object into the view, where task id
// is v (nil: not in it), and reports whether it did (not an older
// rendering, not another's service), with the task's view after it (nil:
// not in the view).
func (c *Checker) mergeLocked(id uint64, v *view, t *client.Task, conn int, now time.Time) (*view, bool) {
	if c.mu.own != nil && !c.mu.own(t.Service) {
		return v, false
	}
	rank, ok := stateRank[t.State]
	c.mu.checked[ixTaskShape]++
	if !ok {
		c.violateLocked(now, TaskShape, fmt.Sprintf("task %d has observed state %q", id, t.State), fmt.Sprintf("%+v", *t))
		return v, false
	}
	if rank >= rankAssigned && rank != rankRejected && t.Node == 0 {
		c.violateLocked(now, TaskShape, fmt.Sprintf("task %d is %s without a node", id, t.State), fmt.Sprintf("%+v", *t))
	}
	if v == nil {
		v = &view{rank: -1}
		r := c.mu.agents[id]
		v.handedTo, v.handedOK = r.handedTo, r.handedOK
		c.mu.tasks[id] = v
	}
	c.mu.checked[ixMonotone]++
	if rank < v.rank {
		if conn == v.conn {
			c.violateLocked(now, Monotone, fmt.Sprintf("task %d moved back from %s to %s", id, States[v.rank], t.State),
				describe(id, v), fmt.Sprintf("now: %+v", *t))
		}
		return v, false // an older rendering (a lagging replica): keep what we know
	}
	c.setRankLocked(v, rank)
	v.service, v.slot, v.desired, v.conn, v.stale = t.Service, t.Slot, t.Desired, conn, false
	if t.Node != 0 {
		v.node = t.Node
	}
	if recheckInPlace && rank < rankComplete && c.sameLiveLocked(v.live, t.Addresses) {
		// The task holds what it held: check each address again in place
		// instead of letting go of it and taking it anew.
		v.addrs = t.Addresses
		c.recheckLiveLocked(id, v, now)
		if v.handedOK && v.node != 0 {
			c.checkNodeLocked(id, v, v.handedTo, now)
		}
		return v, true
	}
	v.addrs = t.Addresses
	var live []addrID
	if rank < rankComplete {
		for _, a := range t.Addresses {
			if !a.Released {
				live = append(live, c.mu.addrs.id(a.Network, a.Addr))
			}
		}
	}
	c.setLiveLocked(id, v, live, now)
	if v.handedOK && v.node != 0 {
		c.checkNodeLocked(id, v, v.handedTo, now)
	}
	return v, true
}

// setRankLocked moves v to rank (-1: out of the view) in the counts.
func (c *Checker) setRankLocked(v *view, rank int) {
	if v.rank >= 0 {
		c.mu.byState[v.rank]--
	}
	if rank >= 0 {
		c.mu.byState[rank]++
	}
	v.rank = rank
}

// setLiveLocked replaces the addresses task id holds in the stream's view.
func (c *Checker) setLiveLocked(id uint64, v *view, live []addrID, now time.Time) {
	for _, k := range v.live {
		if c.mu.liveAddr[k] == id {
			delete(c.mu.liveAddr, k)
		}
	}
	v.live = live
	for _, k := range live {
		c.mu.checked[ixAddressLive]++
		if other, ok := c.mu.liveAddr[k]; ok && other != id {
			c.mu.suspects = append(c.mu.suspects, Suspect{Addr: c.mu.addrs.name(k), Tasks: [2]uint64{other, id}, At: now,
				Objects: []string{describe(other, c.mu.tasks[other]), describe(id, v)}})
			continue
		}
		c.mu.liveAddr[k] = id
	}
}

// recheckInPlace turns on the in-place check of an unchanged address set
// (off only in the test that holds it to the general path's outcome).
var recheckInPlace = true

// sameLiveLocked reports whether live (a view's addresses) are exactly
// the unreleased addresses of addrs, in order.
func (c *Checker) sameLiveLocked(live []addrID, addrs []client.TaskAddress) bool {
	i := 0
	for _, a := range addrs {
		if a.Released {
			continue
		}
		if i == len(live) || live[i] != c.mu.addrs.id(a.Network, a.Addr) {
			return false
		}
		i++
	}
	return i == len(live) && i > 0
}

// recheckLiveLocked checks the addresses task id still holds, with the
// same outcome as setLiveLocked(id, v, v.live, now): an address held by
// another task is suspected again, one held by nobody is taken.
func (c *Checker) recheckLiveLocked(id uint64, v *view, now time.Time) {
	for _, k := range v.live {
		c.mu.checked[ixAddressLive]++
		other, ok := c.mu.liveAddr[k]
		switch {
		case !ok:
			c.mu.liveAddr[k] = id
		case other != id:
			c.mu.suspects = append(c.mu.suspects, Suspect{Addr: c.mu.addrs.name(k), Tasks: [2]uint64{other, id}, At: now,
				Objects: []string{describe(other, c.mu.tasks[other]), describe(id, v)}})
		}
	}
}

func (c *Checker) checkNodeLocked(id uint64, v *view, node uint32, now time.Time) {
	c.mu.checked[ixOwnNode]++
	if v.node != node {
		c.violateLocked(now, OwnNode, fmt.Sprintf("the agent of node %d was handed task %d, which is on node %d", node, id, v.node),
			describe(id, v))
	}
}

// Handed records that the agent of node received task id in an
// assignments frame.
func (c *Checker) Handed(node uint32, id uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.mu.agents[id]
	if prev, ok := r.handedTo, r.handedOK; ok && prev == node {
		return
	} else if ok {
		c.mu.checked[ixOwnNode]++
		c.violateLocked(now, OwnNode, fmt.Sprintf("task %d was handed to the agents of nodes %d and %d", id, prev, node),
			describe(id, c.mu.tasks[id]))
		return
	}
	r.handedTo, r.handedOK = node, true
	c.mu.agents[id] = r
	if v := c.mu.tasks[id]; v != nil {
		v.handedTo, v.handedOK = node, true
		if v.node != 0 {
			c.checkNodeLocked(id, v, node, now)
		}
	}
}

// Hold records that the agent of node holds the addresses of task id (it
// prepared or started it). Holding again what the task holds is no change.
func (c *Checker) Hold(node uint32, id uint64, network, addrs []string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.mu.agents[id]
	if r.holds {
		return
	}
	var buf [4]addrID
	keys := buf[:0]
	for i := range addrs {
		k := c.mu.addrs.id(network[i], addrs[i])
		c.mu.checked[ixAddressAgents]++
		if h, ok := c.mu.agentAdr[k]; ok && h.task != id {
			c.violateLocked(now, AddressAgents, fmt.Sprintf("address %s is held on the agents by task %d (node %d) and task %d (node %d)",
				c.mu.addrs.name(k), h.task, h.node, id, node), c.conflictLocked(k, h, holder{node, id, now.UnixNano()})...)
			continue
		}
		c.mu.agentAdr[k] = holder{node, id, now.UnixNano()}
		keys = append(keys, k)
	}
	r.holds, r.n = true, uint32(len(keys))
	if len(keys) > 0 {
		r.first = keys[0]
	}
	if len(keys) > 1 {
		c.mu.heldMore[id] = slices.Clone(keys)
	}
	c.mu.agents[id] = r
}

// heldLocked returns the addresses task id holds on an agent, as r (its
// record) says.
func (c *Checker) heldLocked(id uint64, r agentRec) []addrID {
	switch r.n {
	case 0:
		return nil
	case 1:
		return []addrID{r.first}
	}
	return c.mu.heldMore[id]
}

// unholdLocked records that task id, whose record is r, holds nothing.
func (c *Checker) unholdLocked(id uint64, r agentRec) {
	if r.n > 1 {
		delete(c.mu.heldMore, id)
	}
	r.holds, r.n, r.first = false, 0, 0
	c.putAgentLocked(id, r)
}

// putAgentLocked stores task id's record r, or drops it when it says
// nothing.
func (c *Checker) putAgentLocked(id uint64, r agentRec) {
	if !r.holds && !r.handedOK {
		delete(c.mu.agents, id)
		return
	}
	c.mu.agents[id] = r
}

// Release records that the agent let go of task id (it forgot it).
func (c *Checker) Release(id uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.mu.agents[id]
	if !ok || !r.holds {
		return
	}
	for _, k := range c.heldLocked(id, r) {
		if h := c.mu.agentAdr[k]; h.task == id {
			delete(c.mu.agentAdr, k)
			c.mu.released[k] = holder{h.node, id, now.UnixNano()}
		}
	}
	c.unholdLocked(id, r)
}

// NodesGone records that the agents of nodes died with their fleet process
// (a fleet worker on another host that was lost): their simulated
// processes are gone, so what those agents held is held no longer. The
// addresses stay quarantined on the managers until the nodes are
// orphaned; the agents' view no longer counts them as held by live
// processes.
func (c *Checker) NodesGone(nodes []uint32, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gone := make(map[uint32]bool, len(nodes))
	for _, n := range nodes {
		gone[n] = true
	}
	for k, h := range c.mu.agentAdr {
		if gone[h.node] {
			delete(c.mu.agentAdr, k)
			if r := c.mu.agents[h.task]; r.holds {
				c.unholdLocked(h.task, r)
			}
			c.mu.released[k] = holder{h.node, h.task, now.UnixNano()}
		}
	}
}

// Reset replaces the stream's view with a full task list (after the
// stream could not resume and the state was read again). What agents hold
// and were handed stays, and so does the statistics' Timing of each task
// still listed.
func (c *Checker) Reset(tasks []client.Task, conn int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.mu.tasks
	c.mu.tasks = make(map[uint64]*view, len(tasks))
	clear(c.mu.byState)
	// Nodes come again on the new connection; a held-aside suspect whose
	// node's next event may never come is let go.
	clear(c.mu.nodes)
	c.mu.aside = nil
	c.mu.liveAddr = make(map[addrID]uint64, len(tasks))
	for i := range tasks {
		id, err := strconv.ParseUint(tasks[i].ID, 10, 64)
		if err != nil {
			continue
		}
		v, _ := c.mergeLocked(id, c.mu.tasks[id], &tasks[i], conn, now)
		if o := old[id]; o != nil && v != nil && v != o {
			v.timing = o.timing
		}
	}
}

// Quiesced checks, once the cluster settled, that every service in want
// (name → desired running count) has exactly that many running tasks, at
// most one per slot, and that no other service runs tasks.
func (c *Checker) Quiesced(want map[string]int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settleAsideLocked(now)
	running := map[string]int{}
	slots := map[string][]uint64{}
	for id, v := range c.mu.tasks {
		if v.rank != rankRunning {
			continue
		}
		running[v.service]++
		k := fmt.Sprintf("%s.%d", v.service, v.slot)
		slots[k] = append(slots[k], id)
	}
	keys := make([]string, 0, len(slots))
	for k := range slots {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ids := slots[k]
		c.mu.checked[ixOnePerSlot]++
		if len(ids) > 1 {
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			var objs []string
			for _, id := range ids {
				objs = append(objs, describe(id, c.mu.tasks[id]))
			}
			c.violateLocked(now, OnePerSlot, fmt.Sprintf("slot %s has %d running tasks", k, len(ids)), objs...)
		}
	}
	names := make([]string, 0, len(want)+len(running))
	for s := range want {
		names = append(names, s)
	}
	for s := range running {
		if _, ok := want[s]; !ok {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	for _, s := range names {
		c.mu.checked[ixAsDesired]++
		if running[s] != want[s] {
			c.violateLocked(now, AsDesired, fmt.Sprintf("service %s has %d running tasks, desired %d", s, running[s], want[s]))
		}
	}
}

// NotConverged records that the cluster did not reach its desired state
// in time (a liveness failure of as-desired).
func (c *Checker) NotConverged(msg string, now time.Time, objs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.checked[ixAsDesired]++
	c.violateLocked(now, AsDesired, msg, objs...)
}

// ReplicasDisagree records that two replicas hold different states of one
// group at the same applied index.
func (c *Checker) ReplicasDisagree(msg string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.checked[ixReplicasAgree]++
	c.violateLocked(now, ReplicasAgree, msg)
}

// ReplicasAgree records one group whose replicas were compared and agree.
func (c *Checker) ReplicasAgree() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.checked[ixReplicasAgree]++
}

// Running returns how many tasks run in the stream's view, by service.
func (c *Checker) Running() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, v := range c.mu.tasks {
		if v.rank == rankRunning {
			out[v.service]++
		}
	}
	return out
}

// ByState counts the stream's view of tasks by observed state (index:
// rank, as in States).
func (c *Checker) ByState() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mu.byState)
}

// Count returns how many violations were seen.
func (c *Checker) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.mu.count {
		n += k
	}
	return n
}

// Violations returns the kept violations (the first 100), in order.
func (c *Checker) Violations() []report.Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]report.Violation(nil), c.mu.kept...)
}

// Results returns every invariant with how often it was checked and
// broken.
func (c *Checker) Results() []report.Invariant {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []report.Invariant
	for i, n := range Names {
		out = append(out, report.Invariant{Name: n.Name, Description: n.Description,
			Checked: c.mu.checked[i], Violations: c.mu.count[n.Name]})
	}
	return out
}

// conflictLocked describes an address-agents conflict: both tasks as the
// stream's view has them, when each was taken on its agent, the address's
// previous release, and what the first holder's agent keeps for it.
func (c *Checker) conflictLocked(k addrID, first, second holder) []string {
	since := func(ns int64) string { return time.Unix(0, ns).Sub(c.mu.start).Round(time.Millisecond).String() }
	objs := []string{
		describe(first.task, c.mu.tasks[first.task]), describe(second.task, c.mu.tasks[second.task]),
		fmt.Sprintf("task %d took it on node %d at %s; task %d on node %d at %s", first.task, first.node, since(first.at),
			second.task, second.node, since(second.at)),
	}
	if r, ok := c.mu.released[k]; ok {
		objs = append(objs, fmt.Sprintf("before them, task %d (node %d) let it go at %s", r.task, r.node, since(r.at)))
	}
	if c.mu.probe != nil {
		objs = append(objs, fmt.Sprintf("the agent of node %d: %s", first.node, c.mu.probe(first.node, first.task)))
	}
	return objs
}
