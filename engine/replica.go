package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

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
	// onDiverge is Config.OnDiverge: non-nil turns the replay check on.
	onDiverge func(group int, index uint64, detail string, live, restored []byte)

	// shadow is the replay check's state restored from the last snapshot
	// (nil until the first one), with its own scratch output; under mu.
	shadow    *statemachine.State
	shadowOut statemachine.Output

	mu struct {
		sync.RWMutex
		st  *statemachine.State
		out statemachine.Output
	}
	// applied is the index of the last entry applied (or of the snapshot
	// recovered), readable without the lock.
	applied atomic.Uint64
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
	cfg := statemachine.Config{Group: uint16(r.group), Groups: r.groups}
	plantBugs(&cfg)
	return cfg
}

// batches holds decoded batches' arrays for reuse (*[]Command, cleared):
// an entry of 4,096 assignments decoded into a new array left 800 KB of
// garbage on every replica; a pool rather than one per replica, so that
// seventeen groups' arrays are not held for good.
var batches sync.Pool

// Update applies committed entries in order.
func (r *replica) Update(ents []sm.Entry) ([]sm.Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf, _ := batches.Get().(*[]statemachine.Command)
	if buf == nil {
		buf = new([]statemachine.Command)
	}
	for i := range ents {
		r.applyLocked(&ents[i], buf)
	}
	batches.Put(buf)
	if len(ents) > 0 {
		r.applied.Store(ents[len(ents)-1].Index)
	}
	return ents, nil
}

// applyLocked applies one entry, decoding its batch into *buf (which it
// leaves cleared, holding nothing of the entry, and grown to the largest
// batch decoded).
func (r *replica) applyLocked(e *sm.Entry, buf *[]statemachine.Command) {
	out := &r.mu.out
	if len(e.Cmd) == 0 {
		r.mu.st.Apply(nil, e.Index, 0, out)
		if r.shadow != nil {
			r.shadow.Apply(nil, e.Index, 0, &r.shadowOut)
		}
		e.Result = sm.Result{}
		return
	}
	st, batch, err := decodeEntryInto(*buf, e.Cmd)
	if errors.Is(err, statemachine.ErrNewerFormat) {
		// Skipping it would part this replica from those that read it:
		// stop, and say what to do.
		panic(fmt.Sprintf("shoal: group %d's log entry %d was written by a newer version of Shoal (%v); "+
			"this replica stops rather than skip it: run the version the other replicas run", r.group, e.Index, err))
	}
	if err != nil {
		// Every replica decodes the same bytes the same way: the entry is a
		// no-op everywhere (its index still counts, so a replay is still
		// recognised), and the proposer hears why.
		r.mu.st.Apply(nil, e.Index, 0, out)
		if r.shadow != nil {
			r.shadow.Apply(nil, e.Index, 0, &r.shadowOut)
		}
		res := []statemachine.Result{{Code: statemachine.CodeCorrupt, Msg: err.Error()}}
		e.Result = sm.Result{Value: resultCorrupt, Data: statemachine.AppendResults(nil, res)}
		return
	}
	r.mu.st.ApplyEntry(batch, e.Index, st.now, st.notAfter, out)
	if r.shadow != nil {
		r.shadow.ApplyEntry(batch, e.Index, st.now, st.notAfter, &r.shadowOut)
		r.compareShadow(e.Index, batch)
	}
	data := statemachine.AppendResults(nil, out.Results)
	e.Result = sm.Result{Value: uint64(len(out.Results)), Data: data}
	if r.onApply != nil && len(out.Effects) > 0 {
		r.onApply(r.group, e.Index, out.Effects)
	}
	clear(batch)
	if cap(batch) > cap(*buf) {
		*buf = batch[:0]
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

// PrepareSnapshot captures the state for SaveSnapshot, which writes it while
// entries go on applying (dragonboat holds Update off only meanwhile): a
// statemachine.SnapshotStream, which holds the encoding of everything but
// the tasks and keeps a task's encoding only when an entry changes it
// before it is written, instead of the whole canonical encoding (about a
// hundred bytes a task). With the replay check on, the canonical encoding
// itself, which the check compares.
func (r *replica) PrepareSnapshot() (any, error) {
	if r.onDiverge != nil {
		return r.checkReplay()
	}
	// The capture registers itself in the state, so it takes the write
	// lock (readers run in between, never beside it).
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.mu.st.CaptureSnapshot()
	if err != nil {
		return nil, fmt.Errorf("engine: snapshot of group %d: %w", r.group, err)
	}
	return st, nil
}

// compareShadow compares what the entry at index did to the live state and
// to the restored one; at the first difference it reports both states and
// drops the restored one until the next snapshot.
func (r *replica) compareShadow(index uint64, batch []statemachine.Command) {
	out, sh := &r.mu.out, &r.shadowOut
	if slices.Equal(out.Results, sh.Results) && slices.Equal(out.Effects, sh.Effects) &&
		r.mu.st.NumTasks() == r.shadow.NumTasks() && r.mu.st.NextDue() == r.shadow.NextDue() {
		return
	}
	detail := fmt.Sprintf("entry %d (%d commands; first: %+v): live results %+v effects %d, restored results %+v effects %d",
		index, len(batch), firstCommand(batch), out.Results, len(out.Effects), sh.Results, len(sh.Effects))
	r.onDiverge(r.group, index, detail, r.mu.st.Canonical(), r.shadow.Canonical())
	r.shadow = nil
}

func firstCommand(b []statemachine.Command) any {
	if len(b) == 0 {
		return nil
	}
	return b[0]
}

// checkReplay compares the live state with the one restored from the last
// snapshot (both have applied the same entries since), then restores a new
// one from this snapshot.
func (r *replica) checkReplay() (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	raw := r.mu.st.Canonical()
	if r.shadow != nil {
		if other := r.shadow.Canonical(); !bytes.Equal(raw, other) {
			r.onDiverge(r.group, r.mu.st.LastIndex(), "at a snapshot", raw, other)
		}
	}
	sh, err := statemachine.FromCanonical(raw)
	if err != nil {
		return nil, fmt.Errorf("engine: replay check of group %d: the snapshot does not load: %w", r.group, err)
	}
	if err := r.mu.st.CheckInvariants(); err != nil {
		r.onDiverge(r.group, r.mu.st.LastIndex(), "the live state breaks the task model's invariants: "+err.Error(), raw, raw)
	}
	if d := statemachine.DiffDerived(r.mu.st, sh, 10); len(d) > 0 {
		r.onDiverge(r.group, r.mu.st.LastIndex(), "loading the snapshot rebuilds another state: "+strings.Join(d, "; "), raw, raw)
	}
	r.shadow = sh
	return raw, nil
}

// SaveSnapshot writes the captured state in the format
// statemachine.State.Save writes and Load reads. A stream's parts are
// encoded under the read lock, a megabyte at a time, and compressed and
// written outside it; entries applied in between change nothing in it.
func (r *replica) SaveSnapshot(ctx any, w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	var err error
	switch c := ctx.(type) {
	case []byte:
		err = statemachine.SaveCanonical(w, c)
	case *statemachine.SnapshotStream:
		err = statemachine.SaveStream(w, func(buf []byte) ([]byte, bool, error) {
			r.mu.RLock()
			defer r.mu.RUnlock()
			return c.Next(buf)
		})
		r.mu.Lock()
		c.Close()
		r.mu.Unlock()
	default:
		return fmt.Errorf("engine: snapshot context is %T, want a captured state", ctx)
	}
	if err != nil {
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
	r.shadow = nil
	r.applied.Store(st.LastIndex())
	if r.onRecover != nil {
		r.onRecover(r.group, st.LastIndex())
	}
	r.mu.Unlock()
	return nil
}

// Close releases nothing: the state is garbage once dragonboat drops it.
func (r *replica) Close() error { return nil }
