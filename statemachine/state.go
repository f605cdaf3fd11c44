package statemachine

import (
	"cmp"
	"slices"

	"shoal/ipam"
)

// Config fixes a state machine's behaviour. Every replica of a group must use
// the same Config; the fields that affect apply are stored in snapshots.
type Config struct {
	// Group is this state's group number (0 = cluster group); it forms the
	// top 16 bits of every task ID created here, so IDs never collide across
	// groups.
	Group uint16
	// Groups is the number of service groups (default 1). With one, it
	// leases every address block of a network at creation; with more, the
	// cluster group leases blocks to them on demand (lease.go).
	Groups int
	// HistoryRetention is the task history limit a new state starts with
	// (ClusterSettings.TaskHistoryLimit; default 5): the most tasks a slot
	// keeps, counting its live task. CmdSetClusterSettings changes it
	// later; State.Settings reads the current value.
	HistoryRetention int
	// ManualReactions turns off the orchestrator, allocator and reaper
	// reactions inside Apply; they then run only as explicit CmdReconcile,
	// CmdAllocate and CmdReap commands. For the model checker.
	ManualReactions bool

	// seams are the model checker's seeded bugs; empty unless built with
	// -tags shoal_seams.
	seams seams
}

// DefaultHistoryRetention is SwarmKit's default task history limit.
const DefaultHistoryRetention = 5

// State is the replicated state of one group.
type State struct {
	cfg Config
	// settings are the cluster settings (settings.go): replicated, changed
	// only by CmdSetClusterSettings.
	settings ClusterSettings
	// lastWaitMsg is the last allocation message made: the tasks of one
	// full network all say the same, and share one string instead of a
	// copy each (not state: a cache of a pure function's last value).
	lastWaitMsg string
	// lastMsg is the last message-only rare part given to a task
	// (Task.extra): the waiting tasks of a service are told one message,
	// and share one record (not state: never changed, only shared).
	lastMsg *taskExtra
	// nodeGen counts the nodes added, removed and changing status: a
	// service's kept rolling-update walk is void once it moved
	// (keptwalk.go; not state, so not in snapshots).
	nodeGen uint64
	// walkAll makes rolling updates walk every slot at every pass instead
	// of keeping the walk (the property test's reference).
	walkAll bool
	// capture is the snapshot being streamed (snapshot_stream.go), nil
	// when none: a task changed or deleted before it is written keeps its
	// encoding there first (not state: never cloned or encoded).
	capture   *SnapshotStream
	lastIndex uint64
	// lastTime is the time of the last applied entry (unix nanoseconds)
	// after clamping: an entry stamped earlier applies at lastTime, so the
	// state's clock never goes backwards, on every replica alike.
	lastTime    int64
	nextTask    uint64
	nextService ServiceID
	// joinKeys maps a joiner's key to the node ID reserved for it
	// (cluster group; joinkeys.go).
	joinKeys map[string]NodeID
	// req records the request IDs of applied user commands (requests.go).
	req requestLog
	// nextNode is the lowest node ID CmdReserveNodeID may hand out.
	nextNode NodeID
	// nextNetwork is the lowest network ID CmdReserveNetworkID may hand out.
	nextNetwork NetworkID
	// managers maps manager replica IDs to their API addresses (cluster
	// group only), for redirects and the manager list agents get.
	managers map[uint64]string

	services      map[ServiceID]*Service
	serviceByName map[string]ServiceID
	tasks         taskTable
	nodes         map[NodeID]*Node
	networks      map[NetworkID]*Network
	networkNames  map[string]NetworkID
	// removedNodes remembers removed node IDs: IDs are never reused, so a
	// finished task's node reference can never point at a newcomer.
	removedNodes map[NodeID]struct{}
	pools        map[NetworkID]*ipam.Pool
	// poolsOwned lists the pools this state may change in place. Clone
	// shares pools and empties both states' lists: a pool not listed may
	// be shared with a clone, and poolW copies it before its first change.
	poolsOwned map[NetworkID]bool
	// quarNets lists, per node, the networks whose pools hold addresses
	// in quarantine on it, ascending (nodes with none are absent): the
	// sync check asks it for one node at every agent's sync, and a sync
	// or an expiry visits only those pools, where a walk over every pool
	// cost 4–12 % of a follower with a hundred networks. quarantine.go
	// keeps it; the invariants check it against the pools.
	quarNets map[NodeID][]NetworkID
	// labelSets maps a label set's canonical form to the map the nodes
	// with those labels share (labelSet).
	labelSets map[string]map[string]string
	// nWaiting counts the tasks still new (waiting for addresses; the
	// services' queues list them, waitqueue.go).
	nWaiting int
	// waitSvcs lists the services with tasks waiting (their queues, see
	// waitqueue.go); it may still list one whose last task left.
	waitSvcs map[ServiceID]struct{}
	waitPass waitHeap // reused by each pass
	// retryWaiting: addresses were freed, granted or put into quarantine
	// since the waiting tasks last retried. They retry once after the
	// batch's commands and once after its reactions, not at every
	// release: a pass per release, per confirming sync or per block grant
	// went over every waiting task each time (with a hundred networks and
	// a hundred thousand tasks waiting in a group, ten million attempts
	// per round of grants).
	retryWaiting bool
	// delayed indexes replacements held at desired ready by a restart
	// delay; nextDue is the earliest time one of them may need promoting.
	delayed map[TaskID]*Task
	// delayedDue orders delayed by when each task is next due.
	delayedDue dueQueue
	// unknown indexes originals left unknown on a disconnected node, until
	// they reconnect or are lost.
	unknown map[TaskID]*Task
	// unknownDue orders unknown by when each task's window ends.
	unknownDue dueQueue
	// updating indexes services with a rolling update in progress.
	updating map[ServiceID]*Service
	nextDue  int64

	// The cross-group re-drive (outbox.go): ob is used in the cluster
	// group, in in service groups.
	ob outbox
	in inbox

	// observe, when set, sees every change as it is made (the model
	// checker's independent legality checks); never serialized.
	observe *observer

	// scratch, empty between Apply calls
	// fullNets: during a pass over the waiting tasks or the loop over a
	// batch's new tasks, the networks found full (nothing is released
	// within either, so they stay full).
	fullNets map[string]error
	// refusals counts the times a pool had no address for a task: a
	// network found full is asked again only in the next pass or loop
	// (TestRefusalsDoNotGrowWithWaitingTasks).
	refusals uint64
	index    uint64 // the entry being applied
	now      int64
	out      *Output
	dirty    []*Service
	newTasks []*Task
}

// New returns an empty state.
func New(cfg Config) *State {
	if cfg.HistoryRetention <= 0 {
		cfg.HistoryRetention = DefaultHistoryRetention
	}
	groups := max(cfg.Groups, 1)
	return &State{
		ob:            newOutbox(groups),
		in:            newInbox(),
		cfg:           cfg,
		settings:      ClusterSettings{TaskHistoryLimit: cfg.HistoryRetention},
		nextService:   1,
		services:      make(map[ServiceID]*Service),
		serviceByName: make(map[string]ServiceID),
		tasks:         newTaskTable(),
		nodes:         make(map[NodeID]*Node),
		networks:      make(map[NetworkID]*Network),
		networkNames:  make(map[string]NetworkID),
		removedNodes:  make(map[NodeID]struct{}),
		joinKeys:      make(map[string]NodeID),
		pools:         make(map[NetworkID]*ipam.Pool),
		waitSvcs:      make(map[ServiceID]struct{}),
		delayed:       make(map[TaskID]*Task),
		unknown:       make(map[TaskID]*Task),
		updating:      make(map[ServiceID]*Service),
		managers:      make(map[uint64]string),
	}
}

// Config returns the state's configuration.
func (s *State) Config() Config { return s.cfg }

// LastIndex is the Raft index of the last applied entry.
func (s *State) LastIndex() uint64 { return s.lastIndex }

// LastTime is the time (unix nanoseconds) the last applied entry was
// applied at: its proposer's stamp, or the previous entry's time if the
// stamp was earlier. It never decreases.
func (s *State) LastTime() int64 { return s.lastTime }

// Task returns a task by ID (nil if absent). The caller must not modify it.
func (s *State) Task(id TaskID) *Task { return s.tasks.get(id) }

// Node returns a node by ID (nil if absent). The caller must not modify it.
func (s *State) Node(id NodeID) *Node { return s.nodes[id] }

// Service returns a service by ID (nil if absent). The caller must not modify it.
func (s *State) Service(id ServiceID) *Service { return s.services[id] }

// ServiceByName returns a service by name (nil if absent).
func (s *State) ServiceByName(name string) *Service {
	return s.services[s.serviceByName[name]]
}

// NumTasks returns how many tasks the state holds.
func (s *State) NumTasks() int { return s.tasks.len() }

// NumNodes returns the number of nodes.
func (s *State) NumNodes() int { return len(s.nodes) }

// CountTasksByState adds, for every task, one to counts[its observed
// state] (states past the end of counts are not counted). It adds up the
// services' counts (counts.go), kept as tasks change: a metrics scrape
// calls it under the group's read lock, and walking a million tasks there
// took an eighth of a replica's CPU.
func (s *State) CountTasksByState(counts []int) {
	for _, svc := range s.services {
		for i := range min(len(counts), len(svc.counts.ByState)) {
			counts[i] += svc.counts.ByState[i]
		}
	}
}

// ServiceCounts is a service's tasks counted (State.CountServiceTasks).
type ServiceCounts struct {
	// ByState counts the service's tasks by observed state.
	ByState [numTaskStates]int
	// Running counts tasks running, desired running, at the service's
	// current spec version.
	Running int
	// RunningAny counts tasks running and desired running at any spec
	// version: during a rolling update the old version's tasks still
	// serving count here, not in Running.
	RunningAny int
	// Active counts slots with a task that is not being stopped (a global
	// service's desired count).
	Active int
}

// CountServiceTasks counts service id's tasks. It reads counts kept as
// the tasks change (counts.go): listing services calls it for every
// service under the group's read lock.
func (s *State) CountServiceTasks(id ServiceID) ServiceCounts {
	if svc := s.services[id]; svc != nil {
		return svc.counts
	}
	return ServiceCounts{}
}

// ServiceIDs returns every service ID in ascending order.
func (s *State) ServiceIDs() []ServiceID {
	return sortedKeys(s.services)
}

// NodeIDs returns every node ID in ascending order.
func (s *State) NodeIDs() []NodeID {
	return sortedKeys(s.nodes)
}

// NodeTasks returns the tasks on a node in ascending ID order.
func (s *State) NodeTasks(id NodeID) []*Task {
	n := s.nodes[id]
	if n == nil {
		return nil
	}
	ts := slices.Clone(n.tasks)
	slices.SortFunc(ts, func(a, b *Task) int { return cmp.Compare(a.ID, b.ID) })
	return ts
}

// SlotTasks returns a service's slot numbers in order and, per slot, its
// tasks oldest first.
func (s *State) SlotTasks(id ServiceID) (slots []uint32, tasks [][]*Task) {
	svc := s.services[id]
	if svc == nil {
		return nil, nil
	}
	slots = svc.slots.keys()
	for _, n := range slots {
		tasks = append(tasks, slices.Clone(svc.slots.get(n).tasks()))
	}
	return slots, tasks
}

// AppendServiceTasks appends every task of service id to ts, in no
// particular order, and returns it: SlotTasks without a copy per slot.
func (s *State) AppendServiceTasks(ts []*Task, id ServiceID) []*Task {
	if svc := s.services[id]; svc != nil {
		for _, sl := range svc.slots.all() {
			ts = append(ts, sl.tasks()...)
		}
	}
	return ts
}

func sortedKeys[K ~uint32 | ~uint64, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Apply applies a batch of commands carried by the Raft entry at index,
// proposed at time now (unix nanoseconds). out receives one result per
// command and the effects. An entry at or below the last applied index is a
// replay and changes nothing (its results are all OK with no effects).
// Time never goes backwards: an entry stamped before the last applied one
// (a proposer whose clock is behind, a leader change) applies at the last
// applied time instead, decided from replicated data only.
func (s *State) Apply(batch []Command, index uint64, now int64, out *Output) {
	s.ApplyEntry(batch, index, now, 0, out)
}

// ApplyEntry is Apply for an entry that must not take effect after
// notAfter (unix nanoseconds; 0: no deadline). The deadline is compared
// with the state's own time, the latest time of the entries applied
// before this one, never with the entry's own stamp: an entry that
// reaches the log after newer entries carried the state's time past its
// deadline (a proposal forwarded over a connection that was silent for a
// while) is refused, each command with CodeExpired, on every replica
// alike; its index still counts and nothing else changes.
func (s *State) ApplyEntry(batch []Command, index uint64, now, notAfter int64, out *Output) {
	out.reset()
	if index != 0 && index <= s.lastIndex {
		for range batch {
			out.Results = append(out.Results, Result{Msg: "replay"})
		}
		return
	}
	if notAfter != 0 && s.lastTime > notAfter {
		for range batch {
			out.Results = append(out.Results, Result{Code: CodeExpired, Msg: expiredMsg})
		}
		if index != 0 {
			s.lastIndex = index
		}
		return
	}
	now = max(now, s.lastTime)
	s.lastTime = now
	s.now, s.out, s.index = now, out, index
	if len(s.req.order) > 0 {
		s.forgetRequests()
	}
	for i := range batch {
		out.Results = append(out.Results, s.applyRequest(&batch[i]))
	}
	s.retryWaitingTasks()
	if !s.cfg.ManualReactions {
		s.react()
		s.timers()
		s.retryWaitingTasks()
	}
	s.retryWaiting = false
	if s.in.wanted {
		s.in.wanted = false
		s.emit(Effect{Kind: EffBlocksWanted})
	}
	for _, svc := range s.dirty {
		s.takeWork(svc)
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	clear(s.newTasks)
	s.newTasks = s.newTasks[:0]
	s.out = nil
	if index != 0 {
		s.lastIndex = index
	}
}

func (s *State) applyOne(c *Command) Result {
	switch c.Kind {
	case CmdNop:
		return Result{}
	case CmdCreateService:
		return s.createService(c.Spec)
	case CmdUpdateService:
		return s.updateService(c.Spec, c.Seq)
	case CmdRemoveService:
		return s.removeService(c.Name)
	case CmdUpsertNode, CmdRemoveNode, CmdSetNodeStatus, CmdSetAvailability, CmdCreateNetwork, CmdRemoveNetwork:
		if s.cfg.Group == 0 {
			return s.applyCluster(c)
		}
		return s.applyObject(c)
	case CmdAssign:
		return s.assign(c.Task, c.Node)
	case CmdTaskStatus:
		return s.agentStatus(c)
	case CmdOrphan:
		return s.orphan(c.Task)
	case CmdOrphanNode:
		return s.orphanNode(c.Node)
	case CmdReconcile:
		svc := s.ServiceByName(c.Name)
		if svc == nil {
			return reject(CodeNotFound, "service %q does not exist", c.Name)
		}
		s.markDirty(svc)
		s.reconcileSlots(svc)
		return Result{ID: uint64(svc.ID)}
	case CmdAllocate:
		return s.allocate(c.Task)
	case CmdReap:
		return s.reapCmd(c.Task)
	case CmdNodeSync:
		return s.nodeSync(c)
	case CmdRollbackService:
		return s.rollbackService(c.Name)
	case CmdReserveNodeID:
		return s.reserveNodeID(c.Name)
	case CmdReserveNetworkID:
		return s.reserveNetworkID()
	case CmdSetManager:
		return s.setManager(c.Seq, c.Name)
	case CmdPendingReason:
		return s.pendingReason(c)
	case CmdDeliver:
		return s.deliver(c)
	case CmdOutboxAck:
		return s.outboxAck(c.Group, c.Seq)
	case CmdRequestBlocks:
		return s.requestBlocks(c)
	case CmdReturnBlocks:
		return s.returnBlocks(c)
	case CmdGrantBlocks:
		return reject(CodeInvalid, "blocks are granted only by the cluster group, through its outbox")
	case CmdReleaseBlocks:
		return s.releaseBlocks()
	case CmdSetClusterSettings:
		if s.cfg.Group != 0 {
			return reject(CodeInvalid, "cluster settings are changed in the cluster group, whose outbox carries them to every service group")
		}
		return s.applyCluster(c)
	case CmdTick:
		if s.cfg.ManualReactions {
			s.timers()
		}
		return Result{}
	}
	return reject(CodeInvalid, "unknown command kind %d", uint8(c.Kind))
}

func (s *State) emit(e Effect) {
	if s.out != nil {
		if len(s.out.Effects) == cap(s.out.Effects) {
			s.growEffects()
		}
		s.out.Effects = append(s.out.Effects, e)
	}
}

// growEffects doubles the room for effects. append grows a large slice by
// a quarter at a time, copying it each time: an entry that served a
// grant's ten thousand waiting tasks (twenty thousand effects, past what
// an Output keeps between entries) spent four tenths of the pass growing
// them in a million-task ramp.
func (s *State) growEffects() {
	s.out.Effects = slices.Grow(s.out.Effects, max(cap(s.out.Effects), 64))
}

// nodeChanged bumps a node's assignment sequence and tells watchers which
// task changed (kind EffAssignments or EffSeqAdvanced).
func (s *State) nodeChanged(t *Task, kind EffectKind) {
	if n := s.nodes[t.Node]; n != nil {
		n.AssignSeq++
		s.emit(Effect{Kind: kind, Node: t.Node, Task: t.ID, Service: t.Service})
	}
}

// observer receives every change Apply makes, at the moment it makes it.
type observer struct {
	transition func(t *Task, from, to TaskState, by Component)
	desired    func(t *Task, from, to DesiredState)
	created    func(t *Task)
	deleted    func(t *Task, beyondRetention bool)
	svcDeleted func(svc *Service)
}
