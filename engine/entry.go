package engine

import (
	"encoding/binary"
	"fmt"

	"shoal/statemachine"
)

// An entry is what one Raft log entry carries: a header (format version,
// the proposer's clock reading in unix nanoseconds, and the time after
// which the entry must not apply, 0 for none) followed by a batch encoded
// with statemachine.AppendBatch. Format 1 (still read, as no deadline)
// had no deadline.
const (
	entryVersion     = 2
	entryVersionV1   = 1
	entryHeaderLen   = 17
	entryHeaderLenV1 = 9
)

// entryStamp is the time an entry's header carries.
type entryStamp struct {
	// now is the proposer's clock reading (unix nanoseconds).
	now int64
	// notAfter is the state time after which the entry is refused
	// instead of applied (unix nanoseconds; 0: no deadline).
	notAfter int64
}

// appendEntryHeader appends an entry header with stamp st to dst.
func appendEntryHeader(dst []byte, st entryStamp) []byte {
	dst = append(dst, entryVersion)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(st.now))
	return binary.LittleEndian.AppendUint64(dst, uint64(st.notAfter))
}

// encodeEntry returns a whole entry for batch with stamp st.
func encodeEntry(st entryStamp, batch []statemachine.Command, sizeHint int) []byte {
	b := appendEntryHeader(make([]byte, 0, entryHeaderLen+sizeHint), st)
	return statemachine.AppendBatch(b, batch)
}

// encodeEntryEncoded is encodeEntry for commands of which some were
// encoded when they were checked (statemachine.EncodeChecked).
func encodeEntryEncoded(st entryStamp, batch []statemachine.Command, encoded [][]byte, sizeHint int) []byte {
	b := appendEntryHeader(make([]byte, 0, entryHeaderLen+sizeHint), st)
	return statemachine.AppendBatchEncoded(b, batch, encoded)
}

// decodeEntry splits an entry into its stamp and its batch. Corrupt input
// yields an error wrapping statemachine.ErrCorrupt, never a panic.
func decodeEntry(b []byte) (st entryStamp, batch []statemachine.Command, err error) {
	hdr := entryHeaderLen
	if len(b) > 0 && b[0] == entryVersionV1 {
		hdr = entryHeaderLenV1
	}
	if len(b) < hdr {
		return st, nil, fmt.Errorf("%w: entry of %d bytes is shorter than its %d-byte header",
			statemachine.ErrCorrupt, len(b), hdr)
	}
	if b[0] > entryVersion && b[0] <= entryVersion+statemachine.NewerFormats {
		return st, nil, fmt.Errorf("%w: entry format %d, this build knows %d", statemachine.ErrNewerFormat, b[0], entryVersion)
	}
	if b[0] != entryVersion && b[0] != entryVersionV1 {
		return st, nil, fmt.Errorf("%w: entry format %d, this build knows %d", statemachine.ErrCorrupt, b[0], entryVersion)
	}
	st.now = int64(binary.LittleEndian.Uint64(b[1:9]))
	if hdr == entryHeaderLen {
		st.notAfter = int64(binary.LittleEndian.Uint64(b[9:17]))
	}
	batch, err = statemachine.DecodeBatch(b[hdr:])
	if err != nil {
		return entryStamp{}, nil, fmt.Errorf("engine: entry batch: %w", err)
	}
	return st, batch, nil
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
		n += 16 // the rollback configuration
		for k, v := range s.Labels {
			n += 4 + len(k) + len(v)
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
