package wire

import (
	"slices"

	"shoal/internal/varint"
)

// SplitComplete splits one whole COMPLETE into chunks whose frames are each
// at most maxBytes long before compression (maxBytes <= 0 or over
// MaxFrame+MaxFrameOverhead means the largest frame Append writes). Every
// chunk carries a's kind, resync flag, cursors and sequences; tasks and
// removals keep their order; each spec goes into the first chunk with a task
// that refers to it (specs no task refers to go into the first chunk); only
// the final chunk has Last set. The chunks share a's task and removal
// storage. An INCREMENTAL frame is returned as it is. A single task with its
// spec too large for a chunk of its own gets a chunk anyway, which Append
// then refuses with ErrTooLarge.
func SplitComplete(a *Assignments, maxBytes int) []*Assignments {
	if a.Kind != FrameComplete {
		return []*Assignments{a}
	}
	if maxBytes <= 0 || maxBytes > MaxFrame+MaxFrameOverhead {
		maxBytes = MaxFrame + MaxFrameOverhead
	}
	// A chunk's payload may use what the frame header leaves, and never more
	// than MaxFrame; the empty chunk's payload is its fixed part, and the
	// three list counts may grow from one byte to three each.
	empty := &Assignments{Kind: a.Kind, AppliesTo: a.AppliesTo, ResultsIn: a.ResultsIn, Seqs: a.Seqs, Leader: a.Leader}
	scratch, _ := appendAssignments(nil, empty)
	budget := min(maxBytes-headerLen-varint.UvarintLen(MaxFrame), MaxFrame) - len(scratch) - 3*2

	type key struct {
		service string
		version uint32
	}
	specOf := make(map[key]int, len(a.Specs))
	for i, s := range a.Specs {
		if _, dup := specOf[key{s.Service, s.Version}]; !dup {
			specOf[key{s.Service, s.Version}] = i
		}
	}
	placed := make([]bool, len(a.Specs))
	size := func(b []byte) int { n := len(b); scratch = b[:0]; return n }

	var chunks []*Assignments
	cur, used := &Assignments{}, 0
	newChunk := func() {
		chunks = append(chunks, cur)
		cur, used = &Assignments{}, 0
	}
	taskStart, removedStart := 0, 0
	closeTasks := func(end int) {
		if end > taskStart {
			cur.Tasks = a.Tasks[taskStart:end:end]
		}
		taskStart = end
	}
	// Specs no task refers to lead the first chunk.
	referenced := make([]bool, len(a.Specs))
	for i := range a.Tasks {
		if j, ok := specOf[key{a.Tasks[i].Service, a.Tasks[i].SpecVersion}]; ok {
			referenced[j] = true
		}
	}
	for i := range a.Specs {
		if referenced[i] || placed[i] {
			continue
		}
		n := size(appendSpec(scratch, &a.Specs[i]))
		if used > 0 && used+n > budget {
			newChunk()
		}
		cur.Specs = append(cur.Specs, a.Specs[i])
		placed[i], used = true, used+n
	}
	for i := range a.Tasks {
		t := &a.Tasks[i]
		n := size(appendAssignment(scratch, t))
		j, hasSpec := specOf[key{t.Service, t.SpecVersion}]
		hasSpec = hasSpec && !placed[j]
		if hasSpec {
			n += size(appendSpec(scratch, &a.Specs[j]))
		}
		if used > 0 && used+n > budget {
			closeTasks(i)
			newChunk()
		}
		if hasSpec {
			cur.Specs = append(cur.Specs, a.Specs[j])
			placed[j] = true
		}
		used += n
	}
	closeTasks(len(a.Tasks))
	for i, id := range a.Removed {
		n := varint.UvarintLen(uint64(id))
		if used > 0 && used+n > budget {
			if i > removedStart {
				cur.Removed = a.Removed[removedStart:i:i]
			}
			removedStart = i
			newChunk()
		}
		used += n
	}
	if end := len(a.Removed); end > removedStart {
		cur.Removed = a.Removed[removedStart:end:end]
	}
	chunks = append(chunks, cur)
	for _, c := range chunks {
		c.Kind, c.Resync, c.AppliesTo, c.ResultsIn, c.Seqs, c.Leader = a.Kind, a.Resync, a.AppliesTo, a.ResultsIn, a.Seqs, a.Leader
	}
	chunks[len(chunks)-1].Last = true
	return chunks
}

// JoinComplete reassembles the chunks of one COMPLETE, in order, into one
// frame: the inverse of SplitComplete. It checks that every chunk is a
// COMPLETE for the same cursors and that only the final one is Last.
func JoinComplete(chunks []*Assignments) (*Assignments, error) {
	if len(chunks) == 0 {
		return nil, errorf(ErrMalformed, "no chunks to join")
	}
	first := chunks[0]
	out := &Assignments{Kind: first.Kind, Resync: first.Resync, Last: true,
		AppliesTo: first.AppliesTo, ResultsIn: first.ResultsIn, Seqs: first.Seqs, Leader: chunks[len(chunks)-1].Leader}
	for i, c := range chunks {
		switch {
		case c.Kind != FrameComplete:
			return nil, errorf(ErrMalformed, "chunk %d is %s, not complete", i, c.Kind)
		case !slices.Equal(c.AppliesTo, first.AppliesTo) || !slices.Equal(c.ResultsIn, first.ResultsIn) || !slices.Equal(c.Seqs, first.Seqs):
			return nil, errorf(ErrMalformed, "chunk %d belongs to another COMPLETE (its cursors differ)", i)
		case c.Last != (i == len(chunks)-1):
			return nil, errorf(ErrMalformed, "chunk %d of %d has last=%v", i, len(chunks), c.Last)
		}
		out.Specs = append(out.Specs, c.Specs...)
		out.Tasks = append(out.Tasks, c.Tasks...)
		out.Removed = append(out.Removed, c.Removed...)
	}
	return out, nil
}
