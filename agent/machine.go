package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

// ErrGap is returned by Machine.Apply for an INCREMENTAL frame that does not
// apply to the machine's cursor. The machine has dropped its cursor, so the
// next request asks for a COMPLETE.
var ErrGap = errors.New("agent: assignments frame does not follow the last one applied")

// Machine is the agent's pure core: the assignment set with its cursor and
// per-group sequence numbers, every task the agent holds, and the status
// reports owed to the manager. It does no I/O and reads no clock: time comes
// in as an argument, and what must be done comes out as data (Ready) for the
// runner to persist and carry out. It is not safe for concurrent use.
type Machine struct {
	cursor  wire.Cursor
	seqs    []uint64
	specs   map[SpecKey]*wire.Spec
	tasks   map[sm.TaskID]*task
	partial *wire.Assignments // COMPLETE chunks received so far
	current bool              // an assignments frame was applied since Restore: Prepare/Start allowed

	st statusState // status batching (machine_status.go)

	// output not yet taken by Ready
	actions []Action
	spare   []Action // the actions Ready gave last, emptied: the next actions
	// putTasks are the tasks to write at the next Ready (task.dirty): a
	// slice and a flag rather than a set, since every change of a task's
	// status writes it, and a map's inserts, walk and clear at every Ready
	// cost more than the records.
	putTasks []*task
	delTasks []sm.TaskID
	// putSpecs are the specs to write at the next Ready: the machine's
	// own (m.specs' values, never written through), copied into specRecs
	// by Ready.
	putSpecs  []*wire.Spec
	delSpecs  []SpecKey
	metaDirty bool
	meta      Meta // Ready's Writes.Meta, rewritten at each Ready that has one
	syncDirty bool // the pending writes hold a new status or process identity
	// owed lists the tasks whose status the manager has not acknowledged
	// (task.owed; nOwed of them), and tasks that were owed since the last
	// walk (pruned by owedTasks): a flag and a slice rather than a set,
	// which took an insert or a delete at every change of a status.
	owed  []*task
	nOwed int

	// recs is Ready's buffer, kept from one Ready to the next: a task is
	// written at each change of its status, and a new slice of records per
	// Ready was most of the bytes an agent allocated per task.
	recs []TaskRecord
	// specRecs is Ready's buffer for Writes.Specs, kept like recs: a new
	// slice grown by appending at every frame that brought specs was a
	// tenth of the bytes a simulated agent allocated in a ramp.
	specRecs []wire.Spec
	// runs and spareRuns hold the TaskRuns of the actions issued since the
	// last Ready and of the actions that Ready gave (valid until the next
	// Ready, like the actions): one allocation per prepare and per start
	// otherwise.
	runs, spareRuns []TaskRun
}

// SpecKey names one version of one service's spec.
type SpecKey struct {
	Service string
	Version uint32
}

// task is one task the agent holds.
type task struct {
	a        wire.Assignment
	status   wire.StatusReport // latest observed
	acked    wire.StatusReport // the last status the manager acknowledged (or sent us)
	handle   Handle            // the process, once started
	op       Op                // executor operation in flight (not persisted)
	attached bool              // this run holds the process (not persisted)
	inSet    bool              // in the manager's assignment set
	destroy  bool              // the manager's sync asked to destroy it
	released bool              // OpForget done: the agent holds nothing for it
	sending  bool              // its status is in an unanswered batch
	urgent   bool              // its state changed since the last batch took it
	dirty    bool              // in Machine.putTasks: written at the next Ready
	owed     bool              // its status is owed to the manager (counted in Machine.nOwed)
	inOwed   bool              // in Machine.owed
}

// Ready is what the machine asks the runner to do: write Writes to the store
// (one batch), then hand Actions to the executor, in order.
type Ready struct {
	Writes  Writes
	Actions []Action
}

// MachineConfig sets the status batching intervals.
type MachineConfig struct {
	UrgentDelay     time.Duration // after a send, how long until urgent changes (state changes) go out; default 200ms
	RoutineInterval time.Duration // after a send, how long until other changes go out, and after a failed send, any; default 1s
}

func (c *MachineConfig) withDefaults() MachineConfig {
	out := *c
	if out.UrgentDelay <= 0 {
		out.UrgentDelay = 200 * time.Millisecond
	}
	if out.RoutineInterval <= 0 {
		out.RoutineInterval = time.Second
	}
	return out
}

// NewMachine returns an empty machine.
func NewMachine(cfg MachineConfig) *Machine {
	m := &Machine{
		specs: map[SpecKey]*wire.Spec{},
		tasks: map[sm.TaskID]*task{},
	}
	m.st.cfg = cfg.withDefaults()
	return m
}

// Restore loads what a previous run persisted. Tasks at or past starting get
// an OpAttach (their process may still run); nothing is prepared or started
// until the first assignments frame is applied, so a task whose desired state
// changed while the agent was away is never started or resumed.
func (m *Machine) Restore(s *State) {
	m.cursor = slices.Clone(s.Cursor)
	m.seqs = slices.Clone(s.Seqs)
	for i := range s.Specs {
		sp := s.Specs[i]
		m.specs[SpecKey{sp.Service, sp.Version}] = &sp
	}
	for i := range s.Tasks {
		r := &s.Tasks[i]
		t := &task{a: r.Assignment, status: r.Status, acked: r.Acked, handle: r.Handle,
			inSet: !r.Removed, destroy: r.Destroy, released: r.Released}
		m.tasks[t.a.Task] = t
		m.noteStatus(t)
	}
	for _, id := range m.sortedIDs() {
		m.step(m.tasks[id], Observation{}, time.Time{})
	}
}

// Cursor returns the cursor to ask for assignments from: empty asks for a
// COMPLETE.
func (m *Machine) Cursor() wire.Cursor { return m.cursor }

// Current reports whether an assignments frame was applied since Restore.
func (m *Machine) Current() bool { return m.current }

// Apply applies one assignments frame. COMPLETE (or any Resync frame)
// replaces the set: every held task missing from it is stopped and
// forgotten. INCREMENTAL upserts Tasks and stops and forgets Removed; it must
// apply to the machine's cursor, or Apply drops the cursor and returns ErrGap.
// A COMPLETE sent in chunks is applied when its Last chunk arrives.
func (m *Machine) Apply(f *wire.Assignments, now time.Time) error {
	complete := f.Kind == wire.FrameComplete || f.Resync
	if !complete {
		if f.Kind != wire.FrameIncremental {
			return fmt.Errorf("agent: assignments frame of unknown kind %v", f.Kind)
		}
		if !sameCursor(f.AppliesTo, m.cursor) || m.partial != nil {
			err := fmt.Errorf("%w: it applies to %q, the agent is at %q", ErrGap, f.AppliesTo.Token(), m.cursor.Token())
			m.cursor, m.partial, m.metaDirty = nil, nil, true
			return err
		}
	}
	if complete && !f.Last {
		if m.partial == nil {
			m.partial = &wire.Assignments{Kind: wire.FrameComplete}
		}
		m.partial.Specs = append(m.partial.Specs, f.Specs...)
		m.partial.Tasks = append(m.partial.Tasks, f.Tasks...)
		m.partial.ResultsIn = f.ResultsIn
		return nil
	}
	specs, tasks := f.Specs, f.Tasks
	if complete && m.partial != nil {
		specs = append(m.partial.Specs, specs...)
		tasks = append(m.partial.Tasks, tasks...)
		m.partial = nil
	}
	for _, sp := range specs {
		c := detachSpec(sp)
		k := SpecKey{c.Service, c.Version}
		m.specs[k] = &c
		m.putSpecs = append(m.putSpecs, &c)
	}
	if !complete {
		if err := m.missingSpec(tasks); err != nil {
			m.cursor, m.partial, m.metaDirty = nil, nil, true
			return err
		}
	}
	var seen map[sm.TaskID]struct{}
	if complete {
		seen = make(map[sm.TaskID]struct{}, len(tasks))
	}
	for i := range tasks {
		if seen != nil {
			seen[tasks[i].Task] = struct{}{}
		}
		m.upsert(&tasks[i], now)
	}
	if complete {
		for _, id := range m.sortedIDs() {
			if _, ok := seen[id]; !ok {
				m.remove(m.tasks[id], now)
			}
		}
	}
	for _, id := range f.Removed {
		if t := m.tasks[id]; t != nil {
			m.remove(t, now)
		}
	}
	m.cursor = slices.Clone(f.ResultsIn)
	if complete {
		m.seqs = slices.Clone(f.Seqs)
	} else {
		for g, s := range f.Seqs {
			for len(m.seqs) <= g {
				m.seqs = append(m.seqs, 0)
			}
			m.seqs[g] = max(m.seqs[g], s)
		}
	}
	m.metaDirty = true
	if !m.current {
		m.current = true
		for _, id := range m.sortedIDs() {
			m.step(m.tasks[id], Observation{}, now)
		}
	}
	return nil
}

// missingSpec returns an ErrGap for the first task of an INCREMENTAL that
// is still to be started here but runs a spec neither this frame nor an
// earlier one brought: the manager took the spec as sent with an answer
// this agent never got. Asking for a COMPLETE, which carries every spec,
// mends it; the task would otherwise be rejected ("no spec … was
// received") and its replacements with it wherever they land here.
func (m *Machine) missingSpec(tasks []wire.Assignment) error {
	for i := range tasks {
		a := &tasks[i]
		if a.Service == "" || a.Desired > sm.DesiredRunning || a.State >= sm.StateRunning {
			continue
		}
		if m.specs[SpecKey{a.Service, a.SpecVersion}] == nil {
			return fmt.Errorf("%w: task %d runs service %q version %d, whose spec the agent was never sent", ErrGap, a.Task, a.Service, a.SpecVersion)
		}
	}
	return nil
}

// upsert adds or updates one task from the manager's set.
func (m *Machine) upsert(a *wire.Assignment, now time.Time) {
	t := m.tasks[a.Task]
	if t == nil {
		st := wire.StatusReport{Task: a.Task, State: max(a.State, sm.StateAssigned)}
		t = &task{status: st, acked: st, released: a.State.Terminal()}
		m.tasks[a.Task] = t
	}
	t.a = m.detachAssignment(a, &t.a)
	t.inSet = true
	switch {
	case a.State > t.status.State:
		// The manager knows more (an acknowledgement the agent lost, or the
		// node monitor's orphaned): adopt it. A process the manager gave up
		// on is stopped (by Step) without a report.
		t.status = wire.StatusReport{Task: a.Task, State: a.State}
		t.acked = t.status
	case a.State == t.status.State && t.acked != t.status && !t.sending:
		t.acked = t.status // the manager has it: an acknowledgement was lost
	}
	m.noteStatus(t)
	m.markTask(t)
	m.step(t, Observation{}, now)
}

// remove takes a task out of the set: it is stopped (if it runs) and then
// forgotten.
func (m *Machine) remove(t *task, now time.Time) {
	if !t.inSet {
		return
	}
	t.inSet = false
	m.noteStatus(t)
	m.markTask(t)
	m.step(t, Observation{}, now)
}

// Destroy stops and forgets the tasks the manager's sync answer lists.
// Tasks still in the set keep their record (not held any more); others go.
func (m *Machine) Destroy(ids []sm.TaskID, now time.Time) {
	for _, id := range ids {
		t := m.tasks[id]
		if t == nil || t.destroy || t.released {
			continue
		}
		t.destroy = true
		m.markTask(t)
		m.step(t, Observation{}, now)
	}
}

// Observe applies one executor event.
func (m *Machine) Observe(ev Event, now time.Time) {
	t := m.tasks[ev.Task]
	if t == nil || t.released {
		return // forgotten: a late answer
	}
	m.step(t, ev.Obs, now)
}

// step runs Step for t and carries out its decision.
func (m *Machine) step(t *task, obs Observation, now time.Time) {
	if t.released {
		return
	}
	desired := t.a.Desired
	if !t.inSet || t.destroy {
		desired = sm.DesiredRemove
	}
	d := Step(TaskView{State: t.status.State, Desired: desired, Op: t.op, Attached: t.attached, Hold: !m.current}, obs)
	if obs.Kind != ObsNone {
		t.op = OpNone
	}
	switch obs.Kind {
	case ObsStarted:
		t.attached = true
		if t.handle != obs.Handle {
			t.handle = obs.Handle
			m.markTask(t)
			m.syncDirty = true
		}
	case ObsExited, ObsLost:
		t.attached = false
		if !t.handle.IsZero() {
			t.handle = Handle{}
			m.markTask(t)
		}
	}
	if d.State != t.status.State {
		t.status = wire.StatusReport{Task: t.a.Task, State: d.State, ExitCode: d.ExitCode, Message: d.Message, At: now.UnixNano()}
		t.urgent = true
		m.noteStatus(t)
		m.markTask(t)
		m.syncDirty = t.inSet || m.syncDirty
	}
	if d.Do != OpNone {
		m.issue(t, d.Do, now)
	}
	if t.op == OpNone && !t.attached && (!t.inSet || t.destroy) {
		m.forget(t)
	}
}

// issue records op as in flight for t and emits the action.
func (m *Machine) issue(t *task, op Op, now time.Time) {
	a := Action{Op: op, Task: t.a.Task}
	switch op {
	case OpPrepare, OpStart:
		sp := m.specs[SpecKey{t.a.Service, t.a.SpecVersion}]
		if sp == nil {
			// A manager bug; the task cannot run here.
			m.step(t, Observation{Kind: ObsRejected, Message: fmt.Sprintf(
				"agent: no spec for service %q version %d was received", t.a.Service, t.a.SpecVersion)}, now)
			return
		}
		m.runs = append(m.runs, TaskRun{Task: t.a.Task, Service: t.a.Service, Slot: t.a.Slot, Addresses: t.a.Addresses, Spec: sp})
		// A pointer into runs: when a later append moves runs, the
		// actions issued before keep pointing at the old array, whose
		// TaskRuns are never written again.
		a.Run = &m.runs[len(m.runs)-1]
	case OpStop:
		a.Grace = DefaultStopGrace
		if sp := m.specs[SpecKey{t.a.Service, t.a.SpecVersion}]; sp != nil && sp.StopGrace > 0 {
			a.Grace = time.Duration(sp.StopGrace)
		}
	case OpAttach:
		a.Handle = t.handle
	}
	t.op = op
	m.actions = append(m.actions, a)
}

// forget releases t in the executor; a task out of the set goes altogether.
func (m *Machine) forget(t *task) {
	t.released = true
	m.actions = append(m.actions, Action{Op: OpForget, Task: t.a.Task})
	if !t.inSet {
		delete(m.tasks, t.a.Task)
		t.dirty = false // Ready skips it
		if t.owed {
			t.owed = false
			m.nOwed--
		}
		m.delTasks = append(m.delTasks, t.a.Task)
		return
	}
	m.markTask(t)
}

// StopAll stops every process the agent holds, as if the manager wanted
// them shut down; it returns the longest stop grace among them. Used when
// the agent exits with Config.StopOnExit.
func (m *Machine) StopAll(now time.Time) time.Duration {
	var longest time.Duration
	for _, id := range m.sortedIDs() {
		t := m.tasks[id]
		if t.attached && t.op == OpNone {
			m.issue(t, OpStop, now)
			longest = max(longest, m.actions[len(m.actions)-1].Grace)
		}
	}
	return longest
}

// Attached returns how many tasks have a process this run holds.
func (m *Machine) Attached() int {
	n := 0
	for _, t := range m.tasks {
		if t.attached {
			n++
		}
	}
	return n
}

// Held returns every task the agent still holds something for, in ID order:
// what a sync and a re-report list.
func (m *Machine) Held() []sm.TaskID {
	var out []sm.TaskID // one slice, sorted, rather than every ID sorted and then filtered
	for id, t := range m.tasks {
		if !t.released {
			if out == nil {
				out = make([]sm.TaskID, 0, len(m.tasks))
			}
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Seqs returns the per-group sequence numbers of the last applied frame.
func (m *Machine) Seqs() []uint64 { return slices.Clone(m.seqs) }

// SessionOpened tells the machine a new session began: the manager will send
// again every spec a frame needs, so specs no task refers to are dropped.
func (m *Machine) SessionOpened() {
	used := map[SpecKey]bool{}
	for _, t := range m.tasks {
		used[SpecKey{t.a.Service, t.a.SpecVersion}] = true
	}
	for k := range m.specs {
		if !used[k] {
			delete(m.specs, k)
			m.delSpecs = append(m.delSpecs, k)
		}
	}
	m.partial = nil
}

// Ready returns and clears what the runner must persist and do. The task
// records (Writes.Tasks), the specs (Writes.Specs), the position
// (Writes.Meta), the actions and the TaskRuns they point to are the
// machine's own buffers, valid until the next call: persist and carry them
// out before calling Ready again.
func (m *Machine) Ready() Ready {
	var rd Ready
	clear(m.recs) // the last call's records: keep no references for the collector
	m.recs = m.recs[:0]
	if len(m.putTasks) > 0 {
		slices.SortFunc(m.putTasks, func(a, b *task) int { return cmp.Compare(a.a.Task, b.a.Task) })
		m.recs = slices.Grow(m.recs, len(m.putTasks))
		for _, t := range m.putTasks {
			if t.dirty { // not forgotten and dropped since
				t.dirty = false
				m.recs = append(m.recs, m.record(t))
			}
		}
		if len(m.recs) > 0 {
			rd.Writes.Tasks = m.recs
		}
		clear(m.putTasks)
		m.putTasks = m.putTasks[:0]
		if cap(m.recs) > 1024 {
			m.recs, m.putTasks = nil, nil // a big frame's room is not kept for good
		}
	}
	rd.Writes.Deleted, m.delTasks = m.delTasks, nil
	clear(m.specRecs) // the last call's specs: keep no references for the collector
	m.specRecs = m.specRecs[:0]
	if len(m.putSpecs) > 0 {
		for _, sp := range m.putSpecs {
			m.specRecs = append(m.specRecs, *sp)
		}
		rd.Writes.Specs = m.specRecs
		clear(m.putSpecs)
		m.putSpecs = m.putSpecs[:0]
		if cap(m.specRecs) > 256 {
			m.specRecs, m.putSpecs = nil, nil // a COMPLETE's room is not kept for good
		}
	}
	rd.Writes.DeletedSpecs, m.delSpecs = m.delSpecs, nil
	if m.metaDirty {
		m.meta.Cursor = append(m.meta.Cursor[:0], m.cursor...)
		m.meta.Seqs = append(m.meta.Seqs[:0], m.seqs...)
		rd.Writes.Meta = &m.meta
		m.metaDirty = false
	}
	rd.Writes.Sync, m.syncDirty = m.syncDirty, false
	rd.Actions = m.actions
	clear(m.spare) // the last call's actions: keep no references for the collector
	m.actions, m.spare = m.spare[:0], m.actions
	if cap(m.spare) > 1024 {
		m.spare = nil // a big frame's room is not kept for good
	}
	clear(m.spareRuns) // the TaskRuns of the last call's actions
	m.runs, m.spareRuns = m.spareRuns[:0], m.runs
	if cap(m.spareRuns) > 1024 {
		m.spareRuns = nil
	}
	return rd
}

func (m *Machine) record(t *task) TaskRecord {
	return TaskRecord{Assignment: t.a, Status: t.status, Acked: t.acked, Handle: t.handle,
		Removed: !t.inSet, Destroy: t.destroy, Released: t.released}
}

func (m *Machine) markTask(t *task) {
	if !t.dirty {
		t.dirty = true
		m.putTasks = append(m.putTasks, t)
	}
}

func (m *Machine) sortedIDs() []sm.TaskID { return sortedKeys(m.tasks) }

func sortedKeys[V any](mp map[sm.TaskID]V) []sm.TaskID {
	ids := make([]sm.TaskID, 0, len(mp))
	for id := range mp {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// sameCursor compares cursors part by part, missing parts counting as 0.
func sameCursor(a, b wire.Cursor) bool {
	for g := range max(len(a), len(b)) {
		if a.Get(g) != b.Get(g) {
			return false
		}
	}
	return true
}

// cloneSpec and cloneAssignment copy the slices of a spec or an
// assignment, so a store or the machine keeps its own (strings are
// immutable and shared).
func cloneSpec(s wire.Spec) wire.Spec {
	s.Command = slices.Clone(s.Command)
	s.Env = slices.Clone(s.Env)
	return s
}

func cloneAssignment(a *wire.Assignment) wire.Assignment {
	c := *a
	c.Addresses = slices.Clone(a.Addresses)
	return c
}

// detachSpec and detachAssignment copy what the machine keeps out of a
// decoded frame, strings included: a frame's strings share one backing
// string, which a kept task would otherwise hold for the whole frame.
// What the machine hands its store is already detached. Each copies a
// spec's or a task's strings into one new string (its parts are
// substrings of it) rather than one allocation per string.
func detachSpec(s wire.Spec) wire.Spec {
	n := len(s.Service) + len(s.Dir)
	for _, c := range s.Command {
		n += len(c)
	}
	for _, e := range s.Env {
		n += len(e)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(s.Service)
	b.WriteString(s.Dir)
	for _, c := range s.Command {
		b.WriteString(c)
	}
	for _, e := range s.Env {
		b.WriteString(e)
	}
	all, at := b.String(), 0
	next := func(x string) string {
		at += len(x)
		return all[at-len(x) : at]
	}
	s.Service = next(s.Service)
	s.Dir = next(s.Dir)
	var strs []string // Command's then Env's, one allocation
	if s.Command != nil || s.Env != nil {
		strs = make([]string, len(s.Command)+len(s.Env))
	}
	if s.Command != nil {
		cmd := strs[:len(s.Command):len(s.Command)]
		for i, c := range s.Command {
			cmd[i] = next(c)
		}
		s.Command = cmd
	}
	if s.Env != nil {
		env := strs[len(strs)-len(s.Env):]
		for i, e := range s.Env {
			env[i] = next(e)
		}
		s.Env = env
	}
	return s
}

// detachAssignment returns a detached copy of a. It takes from old (the
// task's assignment as the machine holds it) what did not change, and the
// service's name from the spec the machine holds for it, when it has one.
func (m *Machine) detachAssignment(a, old *wire.Assignment) wire.Assignment {
	c := *a
	switch {
	case c.Service == old.Service:
		c.Service = old.Service
	default:
		if sp := m.specs[SpecKey{a.Service, a.SpecVersion}]; sp != nil {
			c.Service = sp.Service
		} else {
			c.Service = strings.Clone(a.Service)
		}
	}
	switch {
	case a.Addresses == nil:
	case len(a.Addresses) == 0:
		c.Addresses = []wire.Address{}
	case slices.Equal(a.Addresses, old.Addresses):
		c.Addresses = old.Addresses
	default:
		n := 0
		for _, ad := range a.Addresses {
			n += len(ad.Network) + len(ad.Addr)
		}
		var b strings.Builder
		b.Grow(n)
		for _, ad := range a.Addresses {
			b.WriteString(ad.Network)
			b.WriteString(ad.Addr)
		}
		all, at := b.String(), 0
		c.Addresses = make([]wire.Address, len(a.Addresses))
		for i, ad := range a.Addresses {
			c.Addresses[i].Network = all[at : at+len(ad.Network)]
			at += len(ad.Network)
			c.Addresses[i].Addr = all[at : at+len(ad.Addr)]
			at += len(ad.Addr)
		}
	}
	return c
}
