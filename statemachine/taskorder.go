package statemachine

import (
	"fmt"
	"iter"
	"slices"
)

// A group's task IDs only grow (creation takes the next one, a snapshot
// lists them in order), so the store keeps them in a slice in increasing
// order as well as in its map: listing a page of tasks past a token is a
// binary search and a scan of the page, where a walk of the whole map per
// page made reading a million tasks page by page cost a hundred walks of
// the map. Deleted IDs stay in the slice until the next compaction.

// idList is task IDs in increasing order, plus IDs that left whatever
// they list (dropped at the next compaction). The store's order and each
// service's queue of tasks waiting for addresses are such lists.
type idList []TaskID

// add puts id in its place: at the end, as IDs mostly arrive in
// increasing order (creation, snapshot decoding); one that does not is
// inserted, so the order never depends on that.
func (l *idList) add(id TaskID) {
	if n := len(*l); n == 0 || (*l)[n-1] < id {
		*l = append(*l, id)
		return
	}
	if i, found := slices.BinarySearch(*l, id); !found {
		*l = slices.Insert(*l, i, id)
	}
}

// compact drops the IDs gone reports once they may outnumber the live
// ones (the list is longer than twice live, plus 64): amortized.
func (l *idList) compact(live int, gone func(TaskID) bool) {
	if len(*l) > 2*live+64 {
		*l = slices.DeleteFunc(*l, gone)
	}
}

// indexTask adds id to the store's order.
func (s *State) indexTask(id TaskID) { s.order.add(id) }

// unindexTask notes that a task left the store: the order drops its ID at
// its next compaction.
func (s *State) unindexTask() {
	s.order.compact(len(s.tasks), func(id TaskID) bool { return s.tasks[id] == nil })
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

// TasksInOrder yields every task in ascending ID order: one map read per
// task, where TaskIDs and then Task per ID took two and a slice of every
// ID (the leader's scheduler scans every task at each run). The caller
// must not modify the tasks, nor the state while it ranges.
func (s *State) TasksInOrder() iter.Seq[*Task] {
	return func(yield func(*Task) bool) {
		for _, id := range s.order {
			if t := s.tasks[id]; t != nil && !yield(t) {
				return
			}
		}
	}
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
