package engine

import (
	"fmt"
	"io"
	"sync"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"shoal/statemachine"
)

// replica is one group's in-memory state machine on this NodeHost: a
// statemachine.State behind a RWMutex, so reads run concurrently with each
// other and never with Update.
type replica struct {
	group   int
	groups  int // service groups in the cluster (address blocks are split by it)
	onApply func(group int, index uint64, effects []statemachine.Effect)
	// onRecover is Config.OnRecover.
	onRecover func(group int, index uint64)

	mu struct {
		sync.RWMutex
		st  *statemachine.State
		out statemachine.Output
	}
}

var _ sm.IConcurrentStateMachine = (*replica)(nil)

// resultCorrupt is the sm.Result.Value of an entry that could not be
// decoded; otherwise Value is the number of commands applied.
const resultCorrupt = 1<<64 - 1

// readFunc is the query type replica.Lookup accepts.
type readFunc func(*statemachine.State)

func newReplica(group, groups int, onApply func(int, uint64, []statemachine.Effect)) *replica {
	r := &replica{group: group, groups: groups, onApply: onApply}
	r.mu.st = statemachine.New(r.stateConfig())
	return r
}

// stateConfig is the state machine configuration of this replica's group.
func (r *replica) stateConfig() statemachine.Config {
	return statemachine.Config{Group: uint16(r.group), Groups: r.groups}
}

// Update applies committed entries in order.
func (r *replica) Update(ents []sm.Entry) ([]sm.Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range ents {
		r.applyLocked(&ents[i])
	}
	return ents, nil
}

func (r *replica) applyLocked(e *sm.Entry) {
	out := &r.mu.out
	if len(e.Cmd) == 0 {
		r.mu.st.Apply(nil, e.Index, 0, out)
		e.Result = sm.Result{}
		return
	}
	now, batch, err := decodeEntry(e.Cmd)
	if err != nil {
		// Every replica decodes the same bytes the same way: the entry is a
		// no-op everywhere (its index still counts, so a replay is still
		// recognised), and the proposer hears why.
		r.mu.st.Apply(nil, e.Index, 0, out)
		res := []statemachine.Result{{Code: statemachine.CodeCorrupt, Msg: err.Error()}}
		e.Result = sm.Result{Value: resultCorrupt, Data: statemachine.AppendResults(nil, res)}
		return
	}
	r.mu.st.Apply(batch, e.Index, now, out)
	data := statemachine.AppendResults(make([]byte, 0, 4+4*len(out.Results)), out.Results)
	e.Result = sm.Result{Value: uint64(len(out.Results)), Data: data}
	if r.onApply != nil && len(out.Effects) > 0 {
		r.onApply(r.group, e.Index, out.Effects)
	}
}

// Lookup runs a readFunc under the read lock.
func (r *replica) Lookup(q any) (any, error) {
	fn, ok := q.(readFunc)
	if !ok {
		return nil, fmt.Errorf("engine: unknown query type %T", q)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn(r.mu.st)
	return nil, nil
}

// PrepareSnapshot captures the state's canonical encoding; dragonboat holds
// Update off meanwhile, and compression happens later in SaveSnapshot.
func (r *replica) PrepareSnapshot() (any, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.st.Canonical(), nil
}

// SaveSnapshot writes the captured state with statemachine.SaveCanonical:
// the format statemachine.State.Save writes and Load reads.
func (r *replica) SaveSnapshot(ctx any, w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	raw, ok := ctx.([]byte)
	if !ok {
		return fmt.Errorf("engine: snapshot context is %T, want []byte", ctx)
	}
	if err := statemachine.SaveCanonical(w, raw); err != nil {
		return fmt.Errorf("engine: save snapshot of group %d: %w", r.group, err)
	}
	return nil
}

// RecoverFromSnapshot replaces the state with a saved one.
func (r *replica) RecoverFromSnapshot(rd io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	st := statemachine.New(r.stateConfig())
	if err := st.Load(rd); err != nil {
		return fmt.Errorf("engine: recover group %d from snapshot: %w", r.group, err)
	}
	if g := st.Config().Group; int(g) != r.group {
		return fmt.Errorf("engine: snapshot of group %d offered to group %d", g, r.group)
	}
	r.mu.Lock()
	r.mu.st = st
	if r.onRecover != nil {
		r.onRecover(r.group, st.LastIndex())
	}
	r.mu.Unlock()
	return nil
}

// Close releases nothing: the state is garbage once dragonboat drops it.
func (r *replica) Close() error { return nil }
