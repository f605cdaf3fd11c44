package statemachine

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
)

// A group's task IDs only grow (creation takes the next one, a snapshot
// lists them in order), so the store keeps its tasks in a slice in
// increasing ID order as well as in its map: listing a page of tasks past
// a token is a binary search and a scan of the page, where a walk of the
// whole map per page made reading a million tasks page by page cost a
// hundred walks of the map; and a walk of every task (the leader's
// scheduler scans them all at every run) reads the slice, not the map (a
// map read per task was a third of the leader's CPU in a million-task
// ramp). Deleted tasks stay in the slice, marked gone, until the next
// compaction.

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

// taskList is the store's tasks in increasing ID order, plus deleted ones
// (gone) until the next compaction.
type taskList []*Task

// search returns the position of the first task with an ID of at least id.
func (l taskList) search(id TaskID) int {
	i, _ := slices.BinarySearchFunc(l, id, func(t *Task, id TaskID) int { return cmp.Compare(t.ID, id) })
	return i
}

// indexTask adds t to the store's order, in its place by ID.
func (s *State) indexTask(t *Task) { s.order = insertSorted(s.order, t, taskID) }

func taskID(t *Task) TaskID { return t.ID }

// unindexTask marks t, just deleted from the store, gone; the order drops
// the gone tasks once they may be an eighth of it (plus 64): amortized,
// and a deleted task's memory is held that long at most.
func (s *State) unindexTask(t *Task) {
	t.gone = true
	if len(s.order) > s.tasks.len()+s.tasks.len()/8+64 {
		s.order = slices.DeleteFunc(s.order, func(t *Task) bool { return t.gone })
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
	for _, t := range s.order[s.order.search(after+1):] {
		if len(out) == limit {
			break
		}
		if !t.gone && (keep == nil || keep(t)) {
			out = append(out, t.ID)
		}
	}
	return out
}

// TaskIDs returns every task ID in ascending order.
func (s *State) TaskIDs() []TaskID {
	ids := make([]TaskID, 0, s.tasks.len())
	for _, t := range s.order {
		if !t.gone {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// TasksInOrder yields every task in ascending ID order, from the order's
// slice: no map read (the leader's scheduler scans every task at each
// run). The caller must not modify the tasks, nor the state while it
// ranges.
func (s *State) TasksInOrder() iter.Seq[*Task] {
	return func(yield func(*Task) bool) {
		for _, t := range s.order {
			if !t.gone && !yield(t) {
				return
			}
		}
	}
}

// checkOrder checks the order: increasing, listing every task of the
// store as the store's own object, and the deleted ones as gone.
func (s *State) checkOrder() []error {
	var errs []error
	listed := 0
	for i, t := range s.order {
		if i > 0 && s.order[i-1].ID >= t.ID {
			errs = append(errs, fmt.Errorf("the task order lists task %d after task %d", t.ID, s.order[i-1].ID))
		}
		switch st := s.tasks.get(t.ID); {
		case t.gone && st != nil:
			errs = append(errs, fmt.Errorf("the task order marks task %d gone, but the store has it", t.ID))
		case !t.gone && st != t:
			errs = append(errs, fmt.Errorf("the task order lists task %d, but not as the store's own object", t.ID))
		case !t.gone:
			listed++
		}
	}
	if listed != s.tasks.len() {
		errs = append(errs, fmt.Errorf("the task order lists %d of the %d tasks", listed, s.tasks.len()))
	}
	return errs
}
