package agent

import (
	sm "shoal/statemachine"
	"shoal/wire"
)

// Store keeps the agent's local state across restarts. Implementations:
// MemStore (tests, the loadgen's simulated agents) and PebbleStore.
type Store interface {
	// Load returns everything stored; an empty store gives a zero State.
	Load() (*State, error)
	// Apply writes one batch atomically. w and the slices it holds are
	// the caller's (the machine's buffers): valid until Apply returns.
	Apply(w *Writes) error
	// SaveNodeID stores the node's ID durably before it returns.
	SaveNodeID(id sm.NodeID) error
	// SaveJoinKey stores the key the agent names itself with until it has
	// a node ID (wire.SessionRequest.Key), durably before it returns.
	SaveJoinKey(key string) error
	// Close releases the store.
	Close() error
}

// State is what a Store holds.
type State struct {
	NodeID  sm.NodeID // 0: the node has no ID yet
	JoinKey string    // "": none saved yet
	Meta
	Specs []wire.Spec
	Tasks []TaskRecord // in task ID order
}

// Meta is the assignment position: the cursor to resume the stream from and
// the per-group sequence numbers of the last applied frame.
type Meta struct {
	Cursor wire.Cursor
	Seqs   []uint64
}

// TaskRecord is one task as stored.
type TaskRecord struct {
	Assignment wire.Assignment   // the manager's view, with the spec reference (Service, SpecVersion)
	Status     wire.StatusReport // the latest observed status
	Acked      wire.StatusReport // the last status the manager acknowledged
	Handle     Handle            // the process identity, zero when none runs
	Removed    bool              // out of the assignment set, being stopped
	Destroy    bool              // a sync asked to destroy it
	Released   bool              // nothing held any more
}

// Writes is one batch of changes from Machine.Ready.
type Writes struct {
	// Sync asks for the batch to be durable before Apply returns. The
	// machine sets it when the batch holds something only the agent knows: a
	// new observed status or a process identity. Acknowledgements, the
	// assignment set and the cursor are what the manager can tell again, and
	// a lost acknowledgement costs one duplicate report, so they ride on the
	// next synced batch.
	Sync         bool
	Meta         *Meta // nil: unchanged
	Tasks        []TaskRecord
	Deleted      []sm.TaskID
	Specs        []wire.Spec
	DeletedSpecs []SpecKey
}

// Empty reports whether w changes nothing.
func (w *Writes) Empty() bool {
	return w.Meta == nil && len(w.Tasks) == 0 && len(w.Deleted) == 0 && len(w.Specs) == 0 && len(w.DeletedSpecs) == 0
}
