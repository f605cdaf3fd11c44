package duty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
)

// Memory is an in-memory Cluster: one statemachine.State per group, applied
// synchronously, each submission one entry per group stamped with the
// clock's time and the group's next index. It is the duties' test harness
// and the scenario scripts' world; safe for concurrent use.
type Memory struct {
	clock clock.Clock

	mu struct {
		sync.Mutex
		states    []*statemachine.State
		index     []uint64 // per group: the last entry's index
		out       statemachine.Output
		reject    func(statemachine.Command) error
		drop      func(group int, cmd statemachine.Command) bool
		onApply   func(group int, index uint64, effects []statemachine.Effect)
		onRecover func(group int, index uint64)
		onEntry   func(e Entry)
	}
	configure func(*statemachine.Config) // NewMemoryWith's; nil: none
}

// Entry is one entry a group applied: what a follower replica applies to
// reach the same state (the simulation's replicated log).
type Entry struct {
	Group int
	Index uint64
	At    int64 // the entry's time stamp (UnixNano)
	Cmds  []statemachine.Command
}

var _ Cluster = (*Memory)(nil)

// NewMemory returns a cluster of groups service groups (and the cluster
// group) whose entries are stamped by clock.
func NewMemory(groups int, clk clock.Clock) *Memory { return NewMemoryWith(groups, clk, nil) }

// NewMemoryWith is NewMemory with each group's state configuration passed
// through configure first (nil: none), as the simulation plants a test
// seam in every state. A state Restore loads keeps only what its snapshot
// holds.
func NewMemoryWith(groups int, clk clock.Clock, configure func(*statemachine.Config)) *Memory {
	m := &Memory{clock: clk, configure: configure}
	for g := 0; g <= groups; g++ {
		cfg := statemachine.Config{Group: uint16(g), Groups: groups}
		if configure != nil {
			configure(&cfg)
		}
		m.mu.states = append(m.mu.states, statemachine.New(cfg))
	}
	m.mu.index = make([]uint64, groups+1)
	return m
}

// OnApply calls fn after every applied entry (as engine.Config.OnApply),
// under m's lock: fn must not call back into m.
func (m *Memory) OnApply(fn func(group int, index uint64, effects []statemachine.Effect)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.onApply = fn
}

// OnEntry calls fn with every entry as it is applied (its commands are
// the submitted ones: fn must not change them), under m's lock: fn must
// not call back into m. A follower replica applying the entries in order,
// each at its index and time stamp, holds the same state.
func (m *Memory) OnEntry(fn func(e Entry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.onEntry = fn
}

// OnRecover calls fn after Restore replaced a group's state (as
// engine.Config.OnRecover), under m's lock: fn must not call back into m.
func (m *Memory) OnRecover(fn func(group int, index uint64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.onRecover = fn
}

// FailSubmissions makes every later submitted command for which fn returns
// an error fail with it instead of being applied (nil fn: none fail).
func (m *Memory) FailSubmissions(fn func(statemachine.Command) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.reject = fn
}

// DropApply injects a crash between groups: every later submitted command
// for which fn(group, cmd) is true is not applied to that group (its
// outcome there is ErrDropped), as if the proposer died before proposing
// it there; other groups apply the rest of the submission. nil fn: none.
func (m *Memory) DropApply(fn func(group int, cmd statemachine.Command) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.drop = fn
}

// ErrDropped is the outcome of a command DropApply kept from a group.
var ErrDropped = errors.New("duty: dropped by DropApply (a crash between groups)")

// Restore replaces a group's state by a copy saved and loaded through a
// snapshot (a replica restarting from it), keeping its index.
func (m *Memory) Restore(group int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var buf bytes.Buffer
	if err := m.mu.states[group].Save(&buf); err != nil {
		return err
	}
	s := statemachine.New(statemachine.Config{})
	if err := s.Load(&buf); err != nil {
		return err
	}
	m.mu.states[group] = s
	if m.mu.onRecover != nil {
		m.mu.onRecover(group, m.mu.index[group])
	}
	return nil
}

// Groups returns the number of service groups.
func (m *Memory) Groups() int { return len(m.mu.states) - 1 }

// State returns a group's state. The caller must not use it concurrently
// with submissions.
func (m *Memory) State(group int) *statemachine.State { return m.mu.states[group] }

// Index returns a group's last applied index.
func (m *Memory) Index(group int) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.index[group]
}

// Read is ReadLocal: everything submitted is applied at once.
func (m *Memory) Read(_ context.Context, group int, fn func(*statemachine.State)) error {
	return m.ReadLocal(group, fn)
}

// ReadLocal runs fn over a group's state.
func (m *Memory) ReadLocal(group int, fn func(*statemachine.State)) error {
	if group < 0 || group > m.Groups() {
		return fmt.Errorf("duty: %w: %d", route.ErrNoGroup, group)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(m.mu.states[group])
	return nil
}

// Apply applies cmds to one group as its next entry, whatever their kind,
// and returns a copy of the output (results and effects).
func (m *Memory) Apply(group int, cmds ...statemachine.Command) statemachine.Output {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.applyLocked(group, cmds)
	return statemachine.Output{Results: slices.Clone(out.Results), Effects: slices.Clone(out.Effects)}
}

func (m *Memory) applyLocked(group int, cmds []statemachine.Command) *statemachine.Output {
	m.mu.index[group]++
	idx := m.mu.index[group]
	at := m.clock.Now().UnixNano()
	if m.mu.onEntry != nil {
		m.mu.onEntry(Entry{Group: group, Index: idx, At: at, Cmds: slices.Clone(cmds)})
	}
	m.mu.states[group].Apply(cmds, idx, at, &m.mu.out)
	if m.mu.onApply != nil {
		m.mu.onApply(group, idx, m.mu.out.Effects)
	}
	return &m.mu.out
}

// SubmitMany routes like the engine: one entry per group, commands in
// order. Removals are first checked with every service group (Precheck);
// node and network commands the cluster group applied are then delivered
// to the service groups (Deliver) before it returns.
func (m *Memory) SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	out := make([]route.Outcome, len(cmds))
	if err := ctx.Err(); err != nil {
		for i := range out {
			out[i].Failed = err
		}
		return out
	}
	skip := make([]bool, len(cmds))
	for i := range cmds {
		if r := Precheck(ctx, m, &cmds[i]); r.Code != statemachine.CodeOK {
			out[i].Result, skip[i] = r, true
		}
	}
	if m.submit(cmds, skip, out) {
		_ = Deliver(ctx, m) // what it could not deliver, the outbox duty re-drives
	}
	return out
}

// submit applies cmds (but the skipped ones) and reports whether a node or
// network command was applied.
func (m *Memory) submit(cmds []statemachine.Command, skip []bool, out []route.Outcome) (outbox bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	perGroup := make([][]int, len(m.mu.states)) // command indexes
	seen := make([]bool, len(cmds))
	for i := range cmds {
		if skip[i] {
			continue
		}
		if m.mu.reject != nil {
			if err := m.mu.reject(cmds[i]); err != nil {
				out[i].Failed = err
				continue
			}
		}
		gs, rej := route.Groups(&cmds[i], m.Groups(), nil)
		if rej.Code != statemachine.CodeOK {
			out[i].Result = rej
			continue
		}
		for _, g := range gs {
			perGroup[g] = append(perGroup[g], i)
		}
	}
	var batch []statemachine.Command
	for g, idx := range perGroup {
		if len(idx) == 0 {
			continue
		}
		batch = batch[:0]
		kept := idx[:0:0]
		for _, i := range idx {
			if m.mu.drop != nil && m.mu.drop(g, cmds[i]) {
				out[i].Failed = ErrDropped
				continue
			}
			batch = append(batch, cmds[i])
			kept = append(kept, i)
		}
		if idx = kept; len(idx) == 0 {
			continue
		}
		res := m.applyLocked(g, batch).Results
		for k, i := range idx {
			r := res[k]
			if !seen[i] || (out[i].Result.Code == statemachine.CodeOK && r.Code != statemachine.CodeOK) {
				out[i].Result = r
			}
			seen[i] = true
			if g == route.ClusterGroup && r.Code == statemachine.CodeOK && statemachine.OutboxKind(cmds[i].Kind) {
				outbox = true
			}
		}
	}
	return outbox
}

// SubmitToGroup applies one per-group command to group.
func (m *Memory) SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error) {
	if group < 0 || group > m.Groups() {
		return statemachine.Result{}, fmt.Errorf("duty: %w: %d", route.ErrNoGroup, group)
	}
	if !route.PerGroup(cmd.Kind) {
		rej := statemachine.Result{Code: statemachine.CodeInvalid, Msg: cmd.Kind.String() + " is routed by its object: use SubmitMany"}
		return rej, rej.Err()
	}
	if err := ctx.Err(); err != nil {
		return statemachine.Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.reject != nil {
		if err := m.mu.reject(cmd); err != nil {
			return statemachine.Result{}, err
		}
	}
	if m.mu.drop != nil && m.mu.drop(group, cmd) {
		return statemachine.Result{}, ErrDropped
	}
	r := m.applyLocked(group, []statemachine.Command{cmd}).Results[0]
	return r, r.Err()
}
