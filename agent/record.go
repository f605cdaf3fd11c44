package agent

import (
	"encoding/binary"
	"errors"

	"shoal/internal/varint"
	sm "shoal/statemachine"
	"shoal/wire"
)

// The store's own record encoding: a version byte, then uvarints, zig-zag
// varints and length-prefixed strings, read with internal/varint's bounded
// Reader. Decoding never panics; damaged bytes give ErrCorrupt.

// ErrCorrupt means a stored record does not decode.
var ErrCorrupt = errors.New("agent: stored record is damaged")

const recordVersion = 1

type enc []byte

func (e enc) u(v uint64) enc { return binary.AppendUvarint(e, v) }
func (e enc) i(v int64) enc  { return binary.AppendVarint(e, v) }
func (e enc) s(v string) enc { return append(e.u(uint64(len(v))), v...) }
func (e enc) b(v uint8) enc  { return append(e, v) }
func (e enc) strs(v []string) enc {
	e = e.u(uint64(len(v)))
	for _, x := range v {
		e = e.s(x)
	}
	return e
}
func (e enc) u64s(v []uint64) enc {
	e = e.u(uint64(len(v)))
	for _, x := range v {
		e = e.u(x)
	}
	return e
}

// dec reads a record; its first problem sticks (internal/varint) and
// wraps ErrCorrupt.
type dec struct{ r varint.Reader }

func newDec(b []byte) *dec { return &dec{r: varint.NewReader(b, ErrCorrupt)} }

func (d *dec) u() uint64     { return d.r.Uvarint("number") }
func (d *dec) i() int64      { return d.r.Varint("number") }
func (d *dec) byte() uint8   { return d.r.Byte("byte") }
func (d *dec) s() string     { return d.r.String("string") }
func (d *dec) n(min int) int { return d.r.Count(min, "count") }

func (d *dec) strs() []string {
	n := d.n(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.s()
	}
	return out
}

func (d *dec) u64s() []uint64 {
	n := d.n(1)
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = d.u()
	}
	return out
}

func (d *dec) version() {
	if v := d.byte(); d.r.Err() == nil && v != recordVersion {
		d.r.Fail("record version %d, this agent reads %d", v, recordVersion)
	}
}

func (d *dec) done() error {
	if d.r.Err() == nil && d.r.Len() != 0 {
		d.r.Fail("%d bytes left over", d.r.Len())
	}
	return d.r.Err()
}

func (e enc) report(r *wire.StatusReport) enc {
	return e.b(uint8(r.State)).i(int64(r.ExitCode)).s(r.Message).i(r.At)
}

func (d *dec) report(id sm.TaskID) wire.StatusReport {
	return wire.StatusReport{Task: id, State: sm.TaskState(d.byte()), ExitCode: int32(d.i()), Message: d.s(), At: d.i()}
}

const (
	flagRemoved = 1 << iota
	flagDestroy
	flagReleased
)

func encodeTask(r *TaskRecord) []byte {
	a := &r.Assignment
	e := enc{recordVersion}.u(uint64(a.Task)).s(a.Service).u(uint64(a.Slot)).u(uint64(a.SpecVersion)).
		b(uint8(a.Desired)).b(uint8(a.State)).u(uint64(len(a.Addresses)))
	for _, ad := range a.Addresses {
		e = e.s(ad.Network).s(ad.Addr)
	}
	e = e.report(&r.Status).report(&r.Acked).u(uint64(uint32(r.Handle.Pid))).u(r.Handle.StartTime)
	var f uint8
	if r.Removed {
		f |= flagRemoved
	}
	if r.Destroy {
		f |= flagDestroy
	}
	if r.Released {
		f |= flagReleased
	}
	return e.b(f)
}

func decodeTask(b []byte) (TaskRecord, error) {
	d := newDec(b)
	d.version()
	var r TaskRecord
	a := &r.Assignment
	a.Task = sm.TaskID(d.u())
	a.Service = d.s()
	a.Slot = uint32(d.u())
	a.SpecVersion = uint32(d.u())
	a.Desired = sm.DesiredState(d.byte())
	a.State = sm.TaskState(d.byte())
	if n := d.n(2); n > 0 {
		a.Addresses = make([]wire.Address, n)
		for i := range a.Addresses {
			a.Addresses[i] = wire.Address{Network: d.s(), Addr: d.s()}
		}
	}
	r.Status = d.report(a.Task)
	r.Acked = d.report(a.Task)
	r.Handle = Handle{Pid: int32(uint32(d.u())), StartTime: d.u()}
	f := d.byte()
	r.Removed, r.Destroy, r.Released = f&flagRemoved != 0, f&flagDestroy != 0, f&flagReleased != 0
	return r, d.done()
}

func encodeSpec(s *wire.Spec) []byte {
	return enc{recordVersion}.s(s.Service).u(uint64(s.Version)).strs(s.Command).strs(s.Env).s(s.Dir).i(s.StopGrace)
}

func decodeSpec(b []byte) (wire.Spec, error) {
	d := newDec(b)
	d.version()
	s := wire.Spec{Service: d.s(), Version: uint32(d.u()), Command: d.strs(), Env: d.strs(), Dir: d.s(), StopGrace: d.i()}
	return s, d.done()
}

func encodeMeta(m *Meta) []byte { return enc{recordVersion}.u64s(m.Cursor).u64s(m.Seqs) }

func decodeMeta(b []byte) (Meta, error) {
	d := newDec(b)
	d.version()
	m := Meta{Cursor: d.u64s(), Seqs: d.u64s()}
	return m, d.done()
}
