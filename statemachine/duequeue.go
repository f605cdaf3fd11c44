package statemachine

import "container/heap"

// dueQueue orders tasks by when each is next due, so a timer tick looks only
// at the tasks due by now: the delayed replacements (at their start time,
// or, once that passed with their slot still busy, the time they start
// anyway), and the originals left unknown by a disconnect (at the end of
// their window).
// Walking every delayed task at each tick was a fifth of a replica's CPU
// in a million-task ramp, where tens of thousands of replacements wait
// with start times spread over seconds and one of them is due at almost
// every batch. It is an index of the delayed (or unknown) map, which stays
// the truth: an entry of a task that left it is dropped when it comes up.
type dueQueue []dueEntry

type dueEntry struct {
	at int64 // unix nanoseconds
	id TaskID
}

func (q dueQueue) Len() int { return len(q) }
func (q dueQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].id < q[j].id
}
func (q dueQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *dueQueue) Push(x any)   { *q = append(*q, x.(dueEntry)) }
func (q *dueQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// push queues task id to be looked at again at `at`.
func (q *dueQueue) push(at int64, id TaskID) { heap.Push(q, dueEntry{at, id}) }

// popDue removes and returns the IDs of the entries due by now, in (time,
// ID) order, possibly repeated.
func (q *dueQueue) popDue(now int64) []TaskID {
	var out []TaskID
	for len(*q) > 0 && (*q)[0].at <= now {
		out = append(out, heap.Pop(q).(dueEntry).id)
	}
	return out
}

// drop removes the earliest entry.
func (q *dueQueue) drop() { heap.Pop(q) }

// next returns when the earliest entry that keep accepts is due, dropping
// the entries before it, and false when there is none.
func (q *dueQueue) next(keep func(TaskID) bool) (int64, bool) {
	for len(*q) > 0 && !keep((*q)[0].id) {
		heap.Pop(q)
	}
	if len(*q) == 0 {
		return 0, false
	}
	return (*q)[0].at, true
}
