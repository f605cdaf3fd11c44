package statemachine

import (
	"fmt"
	"io"
	"slices"
)

// SnapshotStream is a snapshot captured at one entry and written later,
// while the state goes on applying entries: the canonical encoding of the
// state as it was at the capture, byte for byte what Canonical returned
// then, without holding it all at once. A state of a million tasks encodes
// to about a hundred megabytes; the stream holds everything but the tasks
// (nodes, services, pools, outbox: small) and, for each task changed or
// deleted since the capture and not yet written, that task's encoding from
// before the change (kept by State.keepTask, which every change to a field
// encodeTask writes calls first). Tasks created since have larger IDs and
// are left out.
//
// Locking is the caller's: the state must not apply an entry while Next
// runs (a reader's lock is enough, Next changes only the stream), and
// CaptureSnapshot and Close change the state, so they run alone. One
// stream per state at a time: a new capture ends the old one, whose Next
// then fails.
type SnapshotStream struct {
	s     *State
	head  []byte // the encoding before the tasks, ending with their count
	tail  []byte // the encoding after the tasks
	count int    // tasks at the capture
	last  TaskID // the largest ID a task had at the capture can have
	next  TaskID // tasks below next are written
	done  int    // tasks written
	// kept holds the encodings at the capture of tasks changed or
	// deleted since, with IDs from next to last.
	kept  map[TaskID][]byte
	stage int // 0: head next, 1: tasks, 2: tail, 3: finished
	ended bool
	chunk int // about how much of the encoding one call to Next adds
}

// streamChunk is about how much of the encoding one call to Next adds.
const streamChunk = flushAt

// CaptureSnapshot starts a snapshot of the state as it is now. It ends
// any stream captured before.
func (s *State) CaptureSnapshot() (*SnapshotStream, error) {
	if s.capture != nil {
		s.capture.end()
		s.capture = nil
	}
	st := &SnapshotStream{s: s, chunk: streamChunk, count: s.tasks.len(), last: TaskID(uint64(s.cfg.Group)<<48 | s.nextTask)}
	var e encoder
	if err := s.encodeHead(&e, poolCodec{}); err != nil {
		return nil, fmt.Errorf("statemachine: snapshot: %w", err)
	}
	st.head = e.b
	e = encoder{}
	s.encodeTail(&e)
	st.tail = e.b
	s.capture = st
	return st, nil
}

// keepTask keeps t's encoding in the stream being written, if the stream
// still needs it: every change to a field encodeTask writes, and every
// deletion, calls it first.
func (s *State) keepTask(t *Task) {
	st := s.capture
	if st == nil || t.ID < st.next || t.ID > st.last {
		return
	}
	if _, ok := st.kept[t.ID]; ok {
		return
	}
	if st.kept == nil {
		st.kept = make(map[TaskID][]byte)
	}
	var e encoder
	encodeTask(&e, t)
	st.kept[t.ID] = e.b
}

// Next appends the next part of the encoding to buf (about a megabyte)
// and says whether it was the last.
func (st *SnapshotStream) Next(buf []byte) ([]byte, bool, error) {
	if st.ended {
		return buf, false, fmt.Errorf("statemachine: snapshot stream ended by a later capture")
	}
	switch st.stage {
	case 0:
		st.stage = 1
		return append(buf, st.head...), false, nil
	case 1:
		return st.tasks(buf)
	case 2:
		st.stage = 3
		return append(buf, st.tail...), true, nil
	}
	return buf, true, nil
}

// tasks appends the next tasks in ID order: the live ones unless kept,
// and the kept ones (changed or deleted) merged in.
func (st *SnapshotStream) tasks(buf []byte) ([]byte, bool, error) {
	e := encoder{b: buf}
	// The live tasks this part writes: from next up to the chunk's size.
	end, full := st.last, false
	var live []*Task
	size := 0
	for id, t := range st.s.tasks.from(st.next) {
		if id > st.last {
			break
		}
		if size >= st.chunk {
			end, full = id-1, true
			break
		}
		live = append(live, t)
		size += 64 // about a task's encoding: only the part's size depends on it
	}
	var kept []TaskID
	for id := range st.kept {
		if id <= end {
			kept = append(kept, id)
		}
	}
	slices.Sort(kept)
	// Tasks deleted since the capture are only in kept, so they count
	// toward the part's size here: a part stops at its size even when a
	// removal left many of them (the rest go in the next part).
	start := len(e.b)
	for len(live) > 0 || len(kept) > 0 {
		var id TaskID
		switch {
		case len(kept) > 0 && (len(live) == 0 || kept[0] <= live[0].ID):
			id = kept[0]
			e.b = append(e.b, st.kept[id]...)
			delete(st.kept, id)
			kept = kept[1:]
			if len(live) > 0 && live[0].ID == id {
				live = live[1:]
			}
		default:
			id = live[0].ID
			encodeTask(&e, live[0])
			live = live[1:]
		}
		st.done++
		if len(e.b)-start >= st.chunk && (len(live) > 0 || len(kept) > 0) {
			end, full = id, true
			break
		}
	}
	if full {
		st.next = end + 1
		return e.b, false, nil
	}
	st.next = st.last + 1
	st.stage = 2
	if st.done != st.count {
		return e.b, false, fmt.Errorf("statemachine: snapshot stream wrote %d tasks of the %d captured", st.done, st.count)
	}
	return e.b, false, nil
}

// Close ends the stream: the state keeps no more task encodings for it.
func (st *SnapshotStream) Close() {
	if st.s.capture == st {
		st.s.capture = nil
	}
	st.end()
}

func (st *SnapshotStream) end() {
	st.ended = true
	st.kept = nil
	st.head, st.tail = nil, nil
}

// SaveStream writes a stream, compressed, in Save's format: what
// SaveCanonical writes for the encoding captured. next returns the
// stream's next part appended to its argument (the engine calls Next
// under its lock there).
func SaveStream(w io.Writer, next func([]byte) ([]byte, bool, error)) error {
	return compressTo(w, func(zw io.Writer) error {
		buf := make([]byte, 0, streamChunk+streamChunk/4)
		for {
			var last bool
			var err error
			buf, last, err = next(buf[:0])
			if err != nil {
				return err
			}
			if _, err := zw.Write(buf); err != nil {
				return err
			}
			if last {
				return nil
			}
		}
	})
}
