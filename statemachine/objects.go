package statemachine

import "slices"

// TaskID identifies a task across every group: the top 16 bits are the
// group that created it, the rest a per-group counter.
type TaskID uint64

// NodeID identifies a node; 0 means "no node".
type NodeID uint32

// ServiceID identifies a service inside its group; 0 means "none".
type ServiceID uint32

// NetworkID identifies a network; 0 means "none".
type NetworkID uint32

// RestartPolicy says when and how a dead task in a live slot is replaced.
type RestartPolicy struct {
	Condition RestartCondition
	// Delay before a replacement may start, in nanoseconds (default 5s;
	// enforced by the control plane, carried here).
	Delay int64
	// MaxAttempts per slot and spec version; 0 means unlimited.
	MaxAttempts uint32
	// Window over which attempts are counted, in nanoseconds; 0 means forever.
	Window int64
}

// ServiceSpec is what a user declares.
type ServiceSpec struct {
	Name     string
	Mode     ServiceMode
	Replicas uint32 // replicated services only
	// Image is opaque to the control plane; agents interpret it.
	Image string
	// Command is the process a task runs (argv; Command[0] is looked up in
	// the agent's PATH), Env its extra environment as KEY=VALUE, Dir its
	// working directory (default: the agent's task directory).
	Command []string
	Env     []string
	Dir     string
	// StopGrace is how long an agent waits after SIGTERM before SIGKILL, in
	// nanoseconds (default 10s, applied by the agent when 0).
	StopGrace   int64
	Restart     RestartPolicy
	Constraints []string // e.g. "node.labels.zone==a"
	Networks    []string // network names, one address per network per task
	CPU         int64    // milli-cores reserved per task
	Memory      int64    // bytes reserved per task
	Disconnect  DisconnectPolicy
	Update      UpdateConfig
	// Rollback is how a rollback from this spec moves the tasks back to
	// the previous one, in place of Update (SwarmKit's rollback_config; the
	// API's defaults are SwarmKit's: parallelism 1, monitor 5s, pause).
	// Its failure action is pause or continue: a rollback is never rolled
	// back.
	Rollback UpdateConfig
	// Labels are the user's metadata (key → value; a stack's services carry
	// the stack's name). The control plane stores them and nothing more:
	// changing them replaces no task.
	Labels map[string]string
	// Placement shapes where the scheduler puts a replicated service's
	// tasks among the nodes that pass its constraints. Changing it affects
	// later placements only; running tasks are not replaced.
	Placement PlacementPolicy
}

// PlacementPolicy is a service's placement beyond its constraints
// (SwarmKit's placement preferences and max replicas per node).
type PlacementPolicy struct {
	// Preferences are spread descriptors, outermost first, each
	// "node.labels.<key>": the tasks are split evenly across the key's
	// values, each branch across the next key's values. Default none.
	Preferences []string
	// MaxPerNode bounds the service's live tasks per node; 0 (the
	// default) is unlimited.
	MaxPerNode uint32
	// Strategy is how tasks are placed within a preference branch: spread
	// over the least-loaded nodes (the default) or bin-packed onto the
	// most-loaded node that still has room.
	Strategy PlacementStrategy
}

// Service is a declared service and its bookkeeping.
type Service struct {
	ID          ServiceID
	Spec        ServiceSpec
	SpecVersion uint32
	PrevSpec    *ServiceSpec // the spec before the last update, for rollback
	// Remove is set when the user removed the service; it is deleted, and
	// its resources freed, only when its last task is gone.
	Remove bool
	// ModifyIndex is the Raft index of the entry that last changed the
	// service's spec or removal flag (compare-and-set for updates).
	ModifyIndex uint64

	slots slotIndex // slot number (node ID for global) → tasks
	// slotOrder caches the slot numbers in order for the apply path (nil:
	// build it again; readers sort their own). It is replaced, never
	// changed in place, so a slice handed out stays as it was. A rolling
	// update reconciles every slot at every tick, and sorting them each
	// time was a fifth of a replica's CPU under churn at 100k tasks.
	slotOrder []uint32
	// counts is CountServiceTasks' answer, kept as tasks change.
	counts ServiceCounts
	// restarts counts restart attempts per slot for the current spec version.
	restarts map[uint32]*restartRecord
	// waitQ lists the IDs of its tasks waiting for addresses in
	// increasing order, plus IDs that left waiting since (dropped as
	// met); waitN counts the waiting ones.
	waitQ idList
	waitN int
	// waitMsg is what the service's waiting tasks (those not being
	// stopped, once tried) all say, unless waitMixed: one of them was given another
	// message since (a pass then gives them all its first one's).
	waitMsg   string
	waitMixed bool
	// Update is the progress of the last rolling update.
	Update UpdateStatus
	budget int // slots that may still start updating in this pass (-1: any)
	// walk is the kept rolling-update walk (keptwalk.go).
	walk updateWalk

	// end-of-batch work, empty between Apply calls
	queued     bool     // in State.dirty
	full       bool     // reconcile every slot
	dirtySlots []uint32 // else only these
}

// SpecAt is the one rule for which spec a task of this service at spec
// version v runs: the current spec at SpecVersion, PrevSpec at
// SpecVersion-1 (a rolling update or rollback still runs such tasks), true
// for both. The state keeps no older spec: for any other version (a task
// left two or more versions behind by an update made while another was
// still rolling, or one paused) SpecAt returns the current spec and false.
// The scheduler reserves that spec's resources for such a task and the
// agent is sent that spec for it, so what an agent may start is what is
// reserved; the update replaces the task with one of the current version
// when it reaches its slot. The result is never nil and must not be
// modified.
func (svc *Service) SpecAt(v uint32) (*ServiceSpec, bool) {
	switch {
	case v == svc.SpecVersion:
		return &svc.Spec, true
	case v+1 == svc.SpecVersion && svc.PrevSpec != nil:
		return svc.PrevSpec, true
	}
	return &svc.Spec, false
}

// slotKeys returns the slot numbers in increasing order, from the cache
// (apply path only: it writes the cache). Callers may append to it: its
// capacity is its length, so an append copies.
func (svc *Service) slotKeys() []uint32 {
	if svc.slotOrder == nil {
		svc.slotOrder = slices.Clip(svc.slots.keys())
	}
	return svc.slotOrder
}

// slot holds the tasks of one slot, oldest first (task IDs ascend).
//
// A slot nearly always holds one task, so it keeps that one in place and
// reaches an array only past one: 24 bytes a slot, where a slice header
// beside the one-task array took 48 (the allocator's classes). Exactly
// one of these holds: the slot is empty and both are nil; it holds one
// task, in one[0]; it holds more, in *many (at least two), and one[0] is
// nil (a deleted task is not kept alive by a stale pointer).
type slot struct {
	one   [1]*Task
	many  *[]*Task
	live  int32 // tasks not being stopped (counts.go)
	dirty bool  // listed in its service's dirtySlots
}

// newSlot returns an empty slot.
func newSlot() *slot { return &slot{} }

// tasks lists the slot's tasks, oldest first. The slice is the slot's own
// space: change the slot through add, remove and cloneTasks only.
func (sl *slot) tasks() []*Task {
	if sl.many != nil {
		return *sl.many
	}
	if sl.one[0] != nil {
		return sl.one[:]
	}
	return nil
}

// add appends t to the slot's tasks. Past one they move to an array of
// their own.
func (sl *slot) add(t *Task) {
	switch {
	case sl.many != nil:
		*sl.many = append(*sl.many, t)
	case sl.one[0] == nil:
		sl.one[0] = t
	default:
		l := []*Task{sl.one[0], t}
		sl.many, sl.one[0] = &l, nil
	}
}

// remove drops the task at i, clearing the place it leaves; a slot left
// with one task keeps it in place again.
func (sl *slot) remove(i int) {
	if sl.many == nil {
		if i == 0 {
			sl.one[0] = nil
		}
		return
	}
	l := slices.Delete(*sl.many, i, i+1)
	if len(l) == 1 {
		sl.one[0], sl.many = l[0], nil
		return
	}
	*sl.many = l
}

// cloneTasks sets the slot's tasks to those of src, each found by get
// (the clone's copy of it), in the slot's space where it has room.
func (sl *slot) cloneTasks(src []*Task, get func(TaskID) *Task) {
	if len(src) <= 1 {
		sl.one[0], sl.many = nil, nil
		if len(src) == 1 {
			sl.one[0] = get(src[0].ID)
		}
		return
	}
	sl.one[0] = nil
	if sl.many == nil || cap(*sl.many) < len(src) {
		l := make([]*Task, len(src))
		sl.many = &l
	} else {
		clear((*sl.many)[len(src):cap(*sl.many)])
		*sl.many = (*sl.many)[:len(src)]
	}
	for i, t := range src {
		(*sl.many)[i] = get(t.ID)
	}
}

// TaskStatus is what was last observed of a task.
type TaskStatus struct {
	State     TaskState
	ExitCode  int32
	Timestamp int64 // unix nanoseconds of the entry that set it
	// (The message that goes with it is Task.Message: few tasks have
	// one, so it lives beside the other rare fields, in Task.extra.)
}

// HistoryEntry records one change to a task: a state transition (with the
// component that made it), a desired-state change, or a connectivity marker.
type HistoryEntry struct {
	At    int64 // unix nanoseconds
	State TaskState
	Kind  HistoryKind
	By    Component
	// Desired is the desired state after a HistDesired entry.
	Desired DesiredState
}

// historyCap bounds each task's history; the oldest entries drop first.
const historyCap = 8

// History is a bounded ring of a task's most recent entries. Each entry
// is its time and its four small fields packed in 12 bits of 16, kept in
// two arrays; the ring's start and length live in the spare top bits of
// the first two entries' meta. 80 bytes for eight entries where eight
// HistoryEntry values take 128 (and 88 with the start and length as
// bytes of their own, which with the field order of Task kept a task in
// the allocator's 192-byte class; it fits 176 now: see Task).
type History struct {
	at   [historyCap]int64
	meta [historyCap]histMeta
}

// histMeta packs a HistoryEntry's State (bits 0-3), Kind (4-6), By (7-9)
// and Desired (10-11); the decoder and the enums' ranges keep them within.
// Bits 12-15 of meta[0] hold the ring's start, of meta[1] its length.
type histMeta uint16

const (
	histEntryBits = 0x0fff
	histRingShift = 12
)

func packMeta(e HistoryEntry) histMeta {
	return histMeta(e.State) | histMeta(e.Kind)<<4 | histMeta(e.By)<<7 | histMeta(e.Desired)<<10
}

func (m histMeta) entry(at int64) HistoryEntry {
	return HistoryEntry{At: at, State: TaskState(m & 0xf), Kind: HistoryKind(m >> 4 & 0x7),
		By: Component(m >> 7 & 0x7), Desired: DesiredState(m >> 10 & 0x3)}
}

func (h *History) start() int { return int(h.meta[0] >> histRingShift) }

// setRing records the ring's start and length.
func (h *History) setRing(start, n int) {
	h.meta[0] = h.meta[0]&histEntryBits | histMeta(start)<<histRingShift
	h.meta[1] = h.meta[1]&histEntryBits | histMeta(n)<<histRingShift
}

// put stores entry e at ring position j, keeping the ring's bits.
func (h *History) put(j int, e HistoryEntry) {
	h.at[j] = e.At
	h.meta[j] = h.meta[j]&^histEntryBits | packMeta(e)
}

// Len returns the number of retained entries.
func (h *History) Len() int { return int(h.meta[1] >> histRingShift) }

// At returns the i-th retained entry, oldest first.
func (h *History) At(i int) HistoryEntry {
	j := (h.start() + i) % historyCap
	return h.meta[j].entry(h.at[j])
}

// Last returns the newest entry and whether there is one.
func (h *History) Last() (HistoryEntry, bool) {
	if h.Len() == 0 {
		return HistoryEntry{}, false
	}
	return h.At(h.Len() - 1), true
}

func (h *History) add(e HistoryEntry) {
	start, n := h.start(), h.Len()
	j := (start + n) % historyCap
	if n < historyCap {
		n++
	} else {
		start = (start + 1) % historyCap
	}
	h.put(j, e)
	h.setRing(start, n)
}

// setFirstDesired changes the oldest entry's desired state.
func (h *History) setFirstDesired(d DesiredState) {
	if h.Len() > 0 {
		e := h.At(0)
		e.Desired = d
		h.put(h.start(), e)
	}
}

// Attachment is a task's address on one network (IPv4 as a uint32).
type Attachment struct {
	Network NetworkID
	Addr    uint32
	// Released is set once the task's node confirmed it no longer holds the
	// address (a sync, or the orphan timeout); only then may the pool give
	// it to another task.
	Released bool
}

// Task is one instance of a service on (at most) one node.
type Task struct {
	ID          TaskID
	Service     ServiceID
	Slot        uint32 // replicated: from 1, sparse after a scale-down; global: the node ID
	SpecVersion uint32
	Node        NodeID
	Status      TaskStatus
	History     History
	Attachments []Attachment
	// extra holds what few tasks have: the status message (why a task
	// waits, what its agent said when it failed) and, for a replacement
	// held back at desired ready, when it may start (see StartAt); nil
	// for a running task. It is set anew, never changed in place: clones
	// share it. With the message and the two times on every task, a task
	// with its attachment took the allocator's 192-byte class; it takes
	// 176 with them aside (16 MB less per million tasks and replica).
	extra *taskExtra
	// StopReason says why the orchestrator stopped the task (StopNone while
	// it is wanted): it decides whether the slot gets a replacement.
	StopReason StopReason
	Desired    DesiredState // (here, beside the other small fields: see History)

	nodePos int32 // position in its node's task list, -1 when not listed
}

// taskWithRoom is a task of a service on one network (nearly every task
// that has addresses) allocated with its attachment's array: the collector
// marks one object per such task where it marked two, in the 192 bytes the
// task (176) and its 16-byte array took. A task on no network or several
// is a Task alone.
type taskWithRoom struct {
	Task
	room [1]Attachment
}

// allocTask returns a new task holding v, with room for one attachment
// when networks is 1 (v's attachment, if any, copied into it; else
// Attachments is empty, its array the room). Otherwise the new task
// shares v's Attachments array.
func allocTask(networks int, v *Task) *Task {
	if networks == 1 && len(v.Attachments) <= 1 {
		w := &taskWithRoom{Task: *v}
		w.Attachments = append(w.room[:0:1], v.Attachments...)
		return &w.Task
	}
	t := new(Task)
	*t = *v
	return t
}

// attachmentsRoom returns an empty slice with room for n attachments: the
// task's own when it holds none and has room (allocTask's), else new.
func (t *Task) attachmentsRoom(n int) []Attachment {
	if len(t.Attachments) == 0 && cap(t.Attachments) >= n {
		return t.Attachments[:0]
	}
	return make([]Attachment, 0, n)
}

// taskExtra is a task's rare part (Task.extra): its status message and,
// for a replacement held back by its restart delay (or a stop-first
// update), its start times: see Task.StartAt, StartBy and AfterReject.
type taskExtra struct {
	message          string
	startAt, startBy int64
	afterReject      bool
}

// Message says why the task is where it is: why it waits to be placed or
// for addresses, or what its agent reported with its last state.
func (t *Task) Message() string {
	if t.extra == nil {
		return ""
	}
	return t.extra.message
}

// SetMessage sets the message of a task the caller owns (a copy, never a
// task a State holds: the state machine sets its own tasks' messages).
func (t *Task) SetMessage(m string) { t.setMessage(m, nil) }

// setMessage sets t's message. last, when not nil, is a message-only
// record to share when it says the same (the waiting tasks of a service
// are told one message each: one record, not one per task); a new
// message-only record is left there.
func (t *Task) setMessage(m string, last **taskExtra) {
	var x taskExtra
	if t.extra != nil {
		x = *t.extra
	}
	if x.message == m {
		return
	}
	x.message = m
	if last != nil && x.startAt == 0 && x.startBy == 0 && !x.afterReject && m != "" {
		if *last == nil || (*last).message != m {
			*last = &taskExtra{message: m}
		}
		t.extra = *last
		return
	}
	t.setExtra(x)
}

// setExtra sets t's rare part to x (none when x is empty).
func (t *Task) setExtra(x taskExtra) {
	if x == (taskExtra{}) {
		t.extra = nil
		return
	}
	p := new(taskExtra) // (not &x: x would move to the heap on every call)
	*p = x
	t.extra = p
}

// StartAt, for a replacement held back by its restart delay, is the
// earliest it may start (unix nanoseconds; 0: not delayed).
func (t *Task) StartAt() int64 {
	if t.extra == nil {
		return 0
	}
	return t.extra.startAt
}

// StartBy, for a held-back replacement, is when it starts even if the
// task it replaces has not stopped.
func (t *Task) StartBy() int64 {
	if t.extra == nil {
		return 0
	}
	return t.extra.startBy
}

// AfterReject marks a replacement for a task that was rejected (it never
// ran): it is not placed before StartAt, so a task its nodes keep
// refusing is retried once per restart delay, not as fast as a node can
// refuse it.
func (t *Task) AfterReject() bool { return t.extra != nil && t.extra.afterReject }

// setHold sets t's start times and AfterReject mark (all zero: none),
// keeping its message.
func (t *Task) setHold(startAt, startBy int64, afterReject bool) {
	x := taskExtra{startAt: startAt, startBy: startBy, afterReject: afterReject}
	if t.extra != nil {
		x.message = t.extra.message
	}
	t.setExtra(x)
}

// Node is a machine that runs tasks. Service groups hold a mirror of every
// node's record (fanned out from the cluster group) so that they can check
// updates and follow global services without crossing groups.
type Node struct {
	ID           NodeID
	Name         string
	Role         Role
	Labels       map[string]string
	CPU          int64 // milli-cores
	Memory       int64 // bytes
	Availability Availability
	Status       NodeStatus
	StatusAt     int64 // unix nanoseconds of the last status change
	// AssignSeq grows with every change to the node's assignment set in
	// this group; agent syncs are fenced by it.
	AssignSeq uint64

	tasks []*Task // tasks whose Node is this node
}

// Network is an overlay network services attach to.
type Network struct {
	ID     NetworkID
	Name   string
	Subnet string // CIDR
	// Reserved lists address ranges never handed out, as "first-last"
	// (e.g. "10.0.0.2-10.0.0.9") or single addresses.
	Reserved []string
}
