package statemachine

import (
	"encoding/binary"
	"fmt"
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

// decoder reads what encoder wrote. It never panics: the first problem is
// kept in err and every later read returns zero values.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrCorrupt, what, d.off)
	}
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad unsigned varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// un reads an unsigned value that must not exceed max.
func (d *decoder) un(max uint64, what string) uint64 {
	v := d.u()
	if v > max {
		d.fail(fmt.Sprintf("%s %d out of range", what, v))
		return 0
	}
	return v
}

func (d *decoder) byte1() uint8 {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("unexpected end")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) bool() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

func (d *decoder) str() string {
	n := d.u()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("string longer than the data")
		return ""
	}
	v := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return v
}

// count reads a collection length; each element takes at least minBytes, so
// a length the remaining data cannot hold is corrupt (no huge allocations).
func (d *decoder) count(minBytes int) int {
	n := d.u()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)-d.off)/uint64(minBytes) {
		d.fail(fmt.Sprintf("count %d larger than the data", n))
		return 0
	}
	return int(n)
}
