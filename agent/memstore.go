package agent

import (
	"cmp"
	"slices"
	"sync"

	sm "shoal/statemachine"
	"shoal/wire"
)

// MemStore is a Store in memory: for tests and for the loadgen's simulated
// agents. A restarted simulated agent handed the same MemStore finds what
// it wrote.
type MemStore struct {
	mu struct {
		sync.Mutex
		node  sm.NodeID
		key   string
		meta  Meta
		tasks map[sm.TaskID]TaskRecord
		specs map[SpecKey]wire.Spec
	}
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	s := &MemStore{}
	s.mu.tasks = map[sm.TaskID]TaskRecord{}
	s.mu.specs = map[SpecKey]wire.Spec{}
	return s
}

// Load returns a deep copy of the contents.
func (s *MemStore) Load() (*State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &State{NodeID: s.mu.node, JoinKey: s.mu.key, Meta: Meta{Cursor: slices.Clone(s.mu.meta.Cursor), Seqs: slices.Clone(s.mu.meta.Seqs)}}
	for _, id := range sortedKeys(s.mu.tasks) {
		st.Tasks = append(st.Tasks, cloneRecord(s.mu.tasks[id]))
	}
	for _, sp := range s.mu.specs {
		st.Specs = append(st.Specs, cloneSpec(sp))
	}
	slices.SortFunc(st.Specs, func(a, b wire.Spec) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version))
	})
	return st, nil
}

// Task returns what the store keeps for task id.
func (s *MemStore) Task(id sm.TaskID) (TaskRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.mu.tasks[id]
	if !ok {
		return TaskRecord{}, false
	}
	return cloneRecord(r), true
}

// Cursor returns the assignments cursor the store keeps (what the agent
// asks from after a restart).
func (s *MemStore) Cursor() wire.Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mu.meta.Cursor)
}

// Apply applies w.
func (s *MemStore) Apply(w *Writes) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.Meta != nil {
		// Copied into the store's own slices: Load hands out copies.
		s.mu.meta.Cursor = append(s.mu.meta.Cursor[:0], w.Meta.Cursor...)
		s.mu.meta.Seqs = append(s.mu.meta.Seqs[:0], w.Meta.Seqs...)
	}
	for _, r := range w.Tasks {
		old, ok := s.mu.tasks[r.Assignment.Task]
		if ok && slices.Equal(old.Assignment.Addresses, r.Assignment.Addresses) {
			// A task is written at every change of its status; its
			// addresses seldom change. The stored copy is never written
			// through, so it is kept rather than copied again.
			r.Assignment.Addresses = old.Assignment.Addresses
			s.mu.tasks[r.Assignment.Task] = r
			continue
		}
		s.mu.tasks[r.Assignment.Task] = cloneRecord(r)
	}
	for _, id := range w.Deleted {
		delete(s.mu.tasks, id)
	}
	for _, sp := range w.Specs {
		s.mu.specs[SpecKey{sp.Service, sp.Version}] = cloneSpec(sp)
	}
	for _, k := range w.DeletedSpecs {
		delete(s.mu.specs, k)
	}
	return nil
}

// SaveNodeID stores id.
func (s *MemStore) SaveNodeID(id sm.NodeID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.node = id
	return nil
}

// SaveJoinKey stores key.
func (s *MemStore) SaveJoinKey(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.key = key
	return nil
}

// Close does nothing; the contents stay for the next agent run.
func (s *MemStore) Close() error { return nil }

// Tasks returns the stored task records in ID order (for tests).
func (s *MemStore) Tasks() []TaskRecord {
	st, _ := s.Load()
	return st.Tasks
}

func cloneRecord(r TaskRecord) TaskRecord {
	r.Assignment = cloneAssignment(&r.Assignment)
	return r
}
