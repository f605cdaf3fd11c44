package varint

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by a Reader's errors when the caller gave no
// sentinel of its own.
var ErrCorrupt = errors.New("varint: corrupt data")

// Reader reads values from a byte slice. The zero value is not usable:
// make one with NewReader.
type Reader struct {
	b    []byte
	off  int
	err  error
	wrap error
}

// NewReader returns a Reader over b whose errors wrap sentinel (ErrCorrupt
// if nil).
func NewReader(b []byte, sentinel error) Reader {
	if sentinel == nil {
		sentinel = ErrCorrupt
	}
	return Reader{b: b, wrap: sentinel}
}

// Err returns the first problem met, or nil.
func (r *Reader) Err() error { return r.err }

// Off returns how many bytes were consumed.
func (r *Reader) Off() int { return r.off }

// Len returns how many bytes are left.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Fail records a problem (the first one sticks) at the current offset. The
// format may use %w to keep a cause matchable with errors.Is.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %w (at byte %d)", r.wrap, fmt.Errorf(format, args...), r.off)
	}
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.Fail("bad unsigned varint in %s", what)
		return 0
	}
	r.off += n
	return v
}

// Varint reads a zig-zag signed varint.
func (r *Reader) Varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.Fail("bad varint in %s", what)
		return 0
	}
	r.off += n
	return v
}

// Bounded reads an unsigned varint that must not exceed limit.
func (r *Reader) Bounded(limit uint64, what string) uint64 {
	v := r.Uvarint(what)
	if r.err == nil && v > limit {
		r.Fail("%s %d out of range (max %d)", what, v, limit)
		return 0
	}
	return v
}

// Count reads a collection length whose elements take at least minBytes
// each (at least 1): a length the remaining bytes cannot hold is corrupt.
func (r *Reader) Count(minBytes int, what string) int {
	minBytes = max(minBytes, 1)
	n := r.Uvarint(what)
	if r.err != nil {
		return 0
	}
	if n > uint64(r.Len())/uint64(minBytes) {
		r.Fail("%s %d larger than the data", what, n)
		return 0
	}
	return int(n)
}

// Byte reads one byte.
func (r *Reader) Byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.Fail("unexpected end in %s", what)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// Bool reads a byte that must be 0 or 1.
func (r *Reader) Bool(what string) bool {
	switch r.Byte(what) {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail("bad bool in %s", what)
	return false
}

// Take returns the next n bytes (aliasing the input).
func (r *Reader) Take(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(r.Len()) {
		r.Fail("truncated in %s", what)
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}

// String reads a length-prefixed string.
func (r *Reader) String(what string) string {
	n := r.Uvarint(what)
	return string(r.Take(n, what))
}

// Limit confines the reader to the next n bytes (a length-prefixed
// element): past them it is at its end, until Unlimit(outer) with what
// Limit returned. A length beyond the bytes left fails and confines the
// reader to nothing.
func (r *Reader) Limit(n uint64, what string) (outer int) {
	outer = len(r.b)
	if r.err == nil && n > uint64(r.Len()) {
		r.Fail("truncated in %s", what)
	}
	if r.err != nil {
		n = 0
	}
	r.b = r.b[:r.off+int(n)]
	return outer
}

// Unlimit skips what is left of the element Limit confined the reader to
// (fields a newer writer added) and lifts the limit.
func (r *Reader) Unlimit(outer int) {
	r.off = len(r.b)
	r.b = r.b[:outer]
}
