package statemachine

import (
	"fmt"
	"slices"
)

// A group's task IDs only grow (creation takes the next one, a snapshot
// lists them in order), so the store keeps them in a slice in increasing
// order as well as in its map: listing a page of tasks past a token is a
// binary search and a scan of the page, where a walk of the whole map per
// page made reading a million tasks page by page cost a hundred walks of
// the map. Deleted IDs stay in the slice until the next compaction.

// indexTask appends t's ID to the order (IDs arrive in increasing order;
// one that does not is put in its place).
func (s *State) indexTask(id TaskID) {
	if n := len(s.order); n == 0 || s.order[n-1] < id {
		s.order = append(s.order, id)
		return
	}
	if i, found := slices.BinarySearch(s.order, id); !found {
		s.order = slices.Insert(s.order, i, id)
	}
}

// unindexTask notes that a task left the store: the order drops its ID at
// the next compaction, once deleted IDs outnumber the tasks (amortized).
func (s *State) unindexTask() {
	if len(s.order) > 2*len(s.tasks)+64 {
		s.order = slices.DeleteFunc(s.order, func(id TaskID) bool { return s.tasks[id] == nil })
	}
}

// TaskIDsAfter returns, ascending, the first limit IDs above after of the
// tasks keep accepts (nil keep: every task): a binary search and a scan,
// so a caller paging through a million tasks under the group's read lock
// pays for its page (and the tasks keep refuses), not for the whole store.
func (s *State) TaskIDsAfter(after TaskID, limit int, keep func(*Task) bool) []TaskID {
	if limit <= 0 || after == ^TaskID(0) {
		return nil
	}
	var out []TaskID
	i, _ := slices.BinarySearch(s.order, after+1)
	for _, id := range s.order[i:] {
		if len(out) == limit {
			break
		}
		if t := s.tasks[id]; t != nil && (keep == nil || keep(t)) {
			out = append(out, id)
		}
	}
	return out
}

// TaskIDs returns every task ID in ascending order.
func (s *State) TaskIDs() []TaskID {
	ids := make([]TaskID, 0, len(s.tasks))
	for _, id := range s.order {
		if s.tasks[id] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkOrder checks the order: increasing, and listing every task.
func (s *State) checkOrder() []error {
	var errs []error
	listed := 0
	for i, id := range s.order {
		if i > 0 && s.order[i-1] >= id {
			errs = append(errs, fmt.Errorf("the task order lists task %d after task %d", id, s.order[i-1]))
		}
		if s.tasks[id] != nil {
			listed++
		}
	}
	if listed != len(s.tasks) {
		errs = append(errs, fmt.Errorf("the task order lists %d of the %d tasks", listed, len(s.tasks)))
	}
	return errs
}
