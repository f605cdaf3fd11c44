package statemachine

import "iter"

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
// chunk, 520 bytes. Ranging over the table visits the tasks in no set
// order, as ranging over a map did.
type taskTable struct {
	chunks map[TaskID]*taskChunk // by ID >> taskChunkBits
	n      int
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
	}
}

// len returns the number of tasks.
func (tt *taskTable) len() int { return tt.n }

// all yields every task with its ID, in no set order. The caller must not
// change the table while it ranges.
func (tt *taskTable) all() iter.Seq2[TaskID, *Task] {
	return func(yield func(TaskID, *Task) bool) {
		for k, c := range tt.chunks {
			for i, t := range c.t {
				if t != nil && !yield(k<<taskChunkBits|TaskID(i), t) {
					return
				}
			}
		}
	}
}

// dropMissing removes the tasks whose IDs src does not hold.
func (tt *taskTable) dropMissing(src *taskTable) {
	if tt.n == src.n {
		return // every task of src was written into tt
	}
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
