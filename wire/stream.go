package wire

import (
	"encoding/binary"
	"fmt"
)

// Next splits the first frame off b, which may hold several frames back to
// back (a COMPLETE sent in chunks travels that way): it returns the frame
// and the bytes after it. It checks only the header and the length; Decode
// checks the rest.
func Next(b []byte) (frame, rest []byte, err error) {
	if len(b) < headerLen {
		return nil, nil, fmt.Errorf("%w: %d bytes are too short for a frame header", ErrMalformed, len(b))
	}
	if string(b[:len(magic)]) != magic {
		return nil, nil, fmt.Errorf("%w: not a Shoal wire frame (bad magic)", ErrMalformed)
	}
	n, k := binary.Uvarint(b[headerLen:])
	if k <= 0 || n > uint64(MaxFrame+MaxFrameOverhead) {
		return nil, nil, fmt.Errorf("%w: bad frame length", ErrMalformed)
	}
	end := headerLen + k + int(n)
	if end > len(b) {
		return nil, nil, fmt.Errorf("%w: frame of %d bytes is cut short at %d", ErrMalformed, end, len(b))
	}
	return b[:end], b[end:], nil
}
