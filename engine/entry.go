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

// decodeEntry splits an entry into its stamp and its batch. Corrupt input
// yields an error wrapping statemachine.ErrCorrupt, never a panic.
func decodeEntry(b []byte) (st entryStamp, batch []statemachine.Command, err error) {
	return decodeEntryInto(nil, b)
}

// decodeEntryInto is decodeEntry decoding the batch into buf's array when
// it has room (statemachine.DecodeBatchInto).
func decodeEntryInto(buf []statemachine.Command, b []byte) (st entryStamp, batch []statemachine.Command, err error) {
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
	batch, err = statemachine.DecodeBatchInto(buf, b[hdr:])
	if err != nil {
		return entryStamp{}, nil, fmt.Errorf("engine: entry batch: %w", err)
	}
	return st, batch, nil
}
