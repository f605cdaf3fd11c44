package engine

import (
	"encoding/binary"
	"fmt"

	"shoal/statemachine"
)

// An entry is what one Raft log entry carries: a header (format version,
// the proposer's clock reading in unix nanoseconds) followed by a batch
// encoded with statemachine.AppendBatch.
const (
	entryVersion   = 1
	entryHeaderLen = 9
)

// appendEntryHeader appends an entry header stamped with now to dst.
func appendEntryHeader(dst []byte, now int64) []byte {
	dst = append(dst, entryVersion)
	return binary.LittleEndian.AppendUint64(dst, uint64(now))
}

// encodeEntry returns a whole entry for batch, stamped with now.
func encodeEntry(now int64, batch []statemachine.Command, sizeHint int) []byte {
	b := appendEntryHeader(make([]byte, 0, entryHeaderLen+sizeHint), now)
	return statemachine.AppendBatch(b, batch)
}

// decodeEntry splits an entry into its time and its batch. Corrupt input
// yields an error wrapping statemachine.ErrCorrupt, never a panic.
func decodeEntry(b []byte) (now int64, batch []statemachine.Command, err error) {
	if len(b) < entryHeaderLen {
		return 0, nil, fmt.Errorf("%w: entry of %d bytes is shorter than its %d-byte header",
			statemachine.ErrCorrupt, len(b), entryHeaderLen)
	}
	if b[0] != entryVersion {
		return 0, nil, fmt.Errorf("%w: entry format %d, this build knows %d", statemachine.ErrCorrupt, b[0], entryVersion)
	}
	now = int64(binary.LittleEndian.Uint64(b[1:entryHeaderLen]))
	batch, err = statemachine.DecodeBatch(b[entryHeaderLen:])
	if err != nil {
		return 0, nil, fmt.Errorf("engine: entry batch: %w", err)
	}
	return now, batch, nil
}

// approxSize estimates a command's encoded size, for batch limits.
func approxSize(c *statemachine.Command) int {
	n := 24 + len(c.Name) + len(c.Message)
	if s := c.Spec; s != nil {
		n += 48 + len(s.Name) + len(s.Image) + len(s.Dir)
		for _, a := range s.Command {
			n += 2 + len(a)
		}
		for _, a := range s.Env {
			n += 2 + len(a)
		}
		for _, x := range s.Placement.Preferences {
			n += 2 + len(x)
		}
		for _, x := range s.Constraints {
			n += 2 + len(x)
		}
		for _, x := range s.Networks {
			n += 2 + len(x)
		}
	}
	if nd := c.NodeSpec; nd != nil {
		n += 40 + len(nd.Name) + len(nd.Role.String())
		for k, v := range nd.Labels {
			n += 4 + len(k) + len(v)
		}
	}
	if nw := c.NetworkSpec; nw != nil {
		n += 8 + len(nw.Name) + len(nw.Subnet)
	}
	return n
}
