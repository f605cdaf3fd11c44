package statemachine

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
)

// A group's task IDs only grow (creation takes the next one, a snapshot
// lists them in order), so the store (taskTable) ranges over its tasks in
// increasing ID order: listing a page of tasks past a token is a binary
// search and a scan of the page, where a walk of the whole map per page
// made reading a million tasks page by page cost a hundred walks of the
// map; and a walk of every task (the leader's scheduler scans them all at
// every run) reads the chunks in order, not a map per task (a map read per
// task was a third of the leader's CPU in a million-task ramp).

// idList is task IDs in increasing order, plus IDs that left whatever
// they list (dropped at the next compaction): each service's queue of
// tasks waiting for addresses.
type idList []TaskID

// add puts id in its place: at the end, as IDs mostly arrive in
// increasing order (creation, snapshot decoding); one that does not is
// inserted, so the order never depends on that.
func (l *idList) add(id TaskID) { *l = insertSorted(*l, id, func(id TaskID) TaskID { return id }) }

// insertSorted puts e in l, kept in increasing key order: appended when
// its key is the largest, as IDs mostly arrive in increasing order
// (creation, snapshot decoding); inserted in its place otherwise, so the
// order never depends on that; never twice.
func insertSorted[E any](l []E, e E, key func(E) TaskID) []E {
	k := key(e)
	if n := len(l); n == 0 || key(l[n-1]) < k {
		return append(l, e)
	}
	i, found := slices.BinarySearchFunc(l, k, func(x E, k TaskID) int { return cmp.Compare(key(x), k) })
	if found {
		return l
	}
	return slices.Insert(l, i, e)
}

// compact drops the IDs gone reports once they may outnumber the live
// ones (the list is longer than twice live, plus 64): amortized.
func (l *idList) compact(live int, gone func(TaskID) bool) {
	if len(*l) > 2*live+64 {
		*l = slices.DeleteFunc(*l, gone)
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
	for id, t := range s.tasks.from(after + 1) {
		if len(out) == limit {
			break
		}
		if keep == nil || keep(t) {
			out = append(out, id)
		}
	}
	return out
}

// TaskIDs returns every task ID in ascending order.
func (s *State) TaskIDs() []TaskID {
	ids := make([]TaskID, 0, s.tasks.len())
	for id := range s.tasks.all() {
		ids = append(ids, id)
	}
	return ids
}

// TasksInOrder yields every task in ascending ID order, from the store's
// chunks: a map read per 64 tasks (the leader's scheduler scans every
// task at each run). The caller must not modify the tasks, nor the state
// while it ranges.
func (s *State) TasksInOrder() iter.Seq[*Task] {
	return func(yield func(*Task) bool) {
		for _, t := range s.tasks.all() {
			if !yield(t) {
				return
			}
		}
	}
}

// checkOrder checks the store's order: its chunk keys increasing, every
// chunk listed, each task stored under its own ID, and the count.
func (s *State) checkOrder() []error {
	var errs []error
	tt := &s.tasks
	for i, k := range tt.keys {
		if i > 0 && tt.keys[i-1] >= k {
			errs = append(errs, fmt.Errorf("the task store lists chunk %d after chunk %d", k, tt.keys[i-1]))
		}
	}
	listed := 0
	for k := range tt.chunks {
		if _, found := slices.BinarySearch(tt.keys, k); !found {
			errs = append(errs, fmt.Errorf("the task store does not list chunk %d", k))
		}
	}
	for id, t := range tt.all() {
		if t.ID != id {
			errs = append(errs, fmt.Errorf("the task store holds task %d under ID %d", t.ID, id))
		}
		listed++
	}
	if listed != tt.len() {
		errs = append(errs, fmt.Errorf("the task store ranges over %d of its %d tasks", listed, tt.len()))
	}
	return errs
}
