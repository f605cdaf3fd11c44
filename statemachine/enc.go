package statemachine

import (
	"encoding/binary"

	"shoal/internal/varint"
)

// encoder appends a compact binary form: uvarints, zig-zag varints and
// length-prefixed strings.
type encoder struct{ b []byte }

func (e *encoder) u(v uint64)    { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) i(v int64)     { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) byte1(v uint8) { e.b = append(e.b, v) }
func (e *encoder) str(v string) {
	e.u(uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) bool(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

// decoder reads what encoder wrote: shoal/internal/varint's bounded
// reader (it never panics; the first problem sticks in Err and wraps
// ErrCorrupt) with the short names this package's codecs use.
type decoder struct {
	varint.Reader
	// specExt says the encoding's service specs end with their labels and
	// rollback configuration (batch version 2, snapshot format 7); older
	// ones decode without (decodeSpec).
	specExt bool
}

func newDecoder(b []byte) decoder { return decoder{Reader: varint.NewReader(b, ErrCorrupt)} }

func (d *decoder) fail(what string) { d.Fail("%s", what) }
func (d *decoder) u() uint64        { return d.Uvarint("unsigned varint") }
func (d *decoder) i() int64         { return d.Varint("varint") }
func (d *decoder) byte1() uint8     { return d.Byte("byte") }
func (d *decoder) bool() bool       { return d.Bool("bool") }
func (d *decoder) str() string      { return d.String("string") }

// un reads an unsigned value that must not exceed max.
func (d *decoder) un(max uint64, what string) uint64 { return d.Bounded(max, what) }

// count reads a collection length; each element takes at least minBytes, so
// a length the remaining data cannot hold is corrupt (no huge allocations).
func (d *decoder) count(minBytes int) int { return d.Count(minBytes, "count") }
