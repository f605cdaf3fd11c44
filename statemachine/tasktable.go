package statemachine

import (
	"iter"
	"slices"
)

// taskTable is the store's tasks by ID. A group numbers its tasks in
// sequence, so the IDs of the tasks it holds are mostly dense: the table
// keeps them in chunks of 64 consecutive IDs, found through a small map
// keyed by the chunk. A lookup is a probe of that map, which stays in the
// cache (1,600 chunks for 100,000 tasks), and an index into the chunk,
// where a map of every task missed the cache on its control word and its
// slot at each of the several lookups an agent report or an assignment
// makes; a task takes 8 bytes and an eighth of a chunk's header instead
// of a map slot's 16 bytes at a load of 7/16 to 7/8. A chunk is dropped
// with its last task: at worst (one live task per 64 IDs) a task costs a
// chunk, 520 bytes. The chunks' keys are also kept in order, so the
// table ranges over its tasks in ID order: it replaced both the map and
// a slice of every task sorted by ID (8 more bytes a task, and deleted
// tasks held until its compaction).
type taskTable struct {
	chunks map[TaskID]*taskChunk // by ID >> taskChunkBits
	// keys lists the chunks' keys ascending, plus keys of chunks dropped
	// since the last compaction: ranging over the tasks in ID order (the
	// snapshot, a page of tasks, the scheduler's full scan) walks it.
	keys []TaskID
	n    int
}

const taskChunkBits = 6

type taskChunk struct {
	t [1 << taskChunkBits]*Task
	n int
}

func newTaskTable() taskTable { return taskTable{chunks: make(map[TaskID]*taskChunk)} }

// reuse is the table emptied of nothing, or a new one if it has no map:
// cloneReusing overwrites the tasks it keeps and drops the others.
func (tt taskTable) reuse() taskTable {
	if tt.chunks == nil {
		return newTaskTable()
	}
	return tt
}

// get returns the task id (nil if absent).
func (tt *taskTable) get(id TaskID) *Task {
	if c := tt.chunks[id>>taskChunkBits]; c != nil {
		return c.t[id&(1<<taskChunkBits-1)]
	}
	return nil
}

// set stores t under its ID, in place of any task of that ID.
func (tt *taskTable) set(t *Task) {
	k := t.ID >> taskChunkBits
	c := tt.chunks[k]
	if c == nil {
		c = new(taskChunk)
		tt.chunks[k] = c
		tt.keys = insertSorted(tt.keys, k, func(k TaskID) TaskID { return k })
	}
	p := &c.t[t.ID&(1<<taskChunkBits-1)]
	if *p == nil {
		c.n++
		tt.n++
	}
	*p = t
}

// del removes task id, if the table holds it.
func (tt *taskTable) del(id TaskID) {
	k := id >> taskChunkBits
	c := tt.chunks[k]
	if c == nil {
		return
	}
	p := &c.t[id&(1<<taskChunkBits-1)]
	if *p == nil {
		return
	}
	*p = nil
	tt.n--
	if c.n--; c.n == 0 {
		delete(tt.chunks, k)
		if len(tt.keys) > len(tt.chunks)+len(tt.chunks)/8+64 {
			tt.compact()
		}
	}
}

// compact drops the keys of dropped chunks: amortized, they may be an
// eighth of the keys (plus 64).
func (tt *taskTable) compact() {
	tt.keys = slices.DeleteFunc(tt.keys, func(k TaskID) bool { return tt.chunks[k] == nil })
	if len(tt.keys) == 0 {
		tt.keys = nil // as in a new table
	}
}

// len returns the number of tasks.
func (tt *taskTable) len() int { return tt.n }

// all yields every task with its ID, in ascending ID order. The caller
// must not change the table while it ranges.
func (tt *taskTable) all() iter.Seq2[TaskID, *Task] { return tt.from(0) }

// from yields, in ascending ID order, every task with an ID of at least
// id. The caller must not change the table while it ranges.
func (tt *taskTable) from(id TaskID) iter.Seq2[TaskID, *Task] {
	return func(yield func(TaskID, *Task) bool) {
		first := id >> taskChunkBits
		i, _ := slices.BinarySearch(tt.keys, first)
		for _, k := range tt.keys[i:] {
			c := tt.chunks[k]
			if c == nil {
				continue // dropped; its key goes at the next compaction
			}
			j := 0
			if k == first {
				j = int(id & (1<<taskChunkBits - 1))
			}
			for ; j < len(c.t); j++ {
				if t := c.t[j]; t != nil && !yield(k<<taskChunkBits|TaskID(j), t) {
					return
				}
			}
		}
	}
}

// dropMissing removes the tasks whose IDs src does not hold.
func (tt *taskTable) dropMissing(src *taskTable) {
	if tt.n != src.n { // else every task of src was written into tt
		for k, c := range tt.chunks {
			sc := src.chunks[k]
			for i, t := range c.t {
				if t != nil && (sc == nil || sc.t[i] == nil) {
					c.t[i] = nil
					c.n--
					tt.n--
				}
			}
			if c.n == 0 {
				delete(tt.chunks, k)
			}
		}
	}
	if len(tt.keys) != len(tt.chunks) {
		tt.compact() // a copy lists only its own chunks, as a new table would
	}
}
