package fleet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The observations' stream from a fleet process to the loadgen is a
// sequence of batches in a compact binary framing of its own. gob, which
// carried it before, decoded each observation by reflection, with a slice
// header and two string slices made per observation: decoding was a
// tenth of the loadgen's CPU in a million-task ramp, and encoding a share
// of the simulated agents'.
//
// A batch is its length in bytes (uvarint), then: uvarint count, zigzag
// varint Upto, then count observations:
//
//	kind   one byte
//	node   uvarint
//	task   uvarint
//	stamp  zigzag varint: the difference from the batch's previous stamp
//	       (the first: from 0)
//	at     zigzag varint: At minus the stamp
//	hold   uvarint n, then n pairs (network, address); a network is
//	       uvarint 0 and its string (uvarint length, bytes), which both
//	       sides then add to the stream's table of networks (while it
//	       holds fewer than obsNets), or uvarint i+1 for the table's
//	       entry i; an address is its string
//
// Only a hold carries addresses; every other kind has none (no n). The
// decoder reads a whole batch, then takes it apart in memory.

// Bounds a decoder holds a stream to (a worker's stream comes over the
// network; a malformed one ends it instead of making it allocate at will).
const (
	obsFrameMax = 1 << 28 // bytes per batch
	obsBatchMax = 1 << 20 // observations per batch (a chunk is obsChunk)
	obsAddrMax  = 1 << 12 // addresses per hold
	obsStrMax   = 1 << 12 // bytes per network or address
	obsNets     = 1 << 12 // networks a stream's table keeps
)

// obsEncoder writes batches to w.
type obsEncoder struct {
	w    *bufio.Writer
	buf  []byte
	nets map[string]uint64 // the table: network → its index + 1
}

func newObsEncoder(w *bufio.Writer) *obsEncoder {
	return &obsEncoder{w: w, nets: map[string]uint64{}}
}

// encode writes one batch (into the buffered writer; flushing is the
// caller's).
func (e *obsEncoder) encode(b obsBatch) error {
	buf := binary.AppendUvarint(e.buf[:0], uint64(len(b.Obs)))
	buf = binary.AppendVarint(buf, b.Upto)
	prev := int64(0)
	for i := range b.Obs {
		o := &b.Obs[i]
		if o.Kind != obsHold && (len(o.Nets) > 0 || len(o.Addrs) > 0) {
			return fmt.Errorf("observation of kind %d with addresses", o.Kind)
		}
		buf = append(buf, o.Kind)
		buf = binary.AppendUvarint(buf, uint64(o.Node))
		buf = binary.AppendUvarint(buf, o.Task)
		buf = binary.AppendVarint(buf, o.Stamp-prev)
		buf = binary.AppendVarint(buf, o.At-o.Stamp)
		prev = o.Stamp
		if o.Kind != obsHold {
			continue
		}
		if len(o.Nets) != len(o.Addrs) || len(o.Addrs) > obsAddrMax {
			return fmt.Errorf("a hold of %d networks and %d addresses", len(o.Nets), len(o.Addrs))
		}
		buf = binary.AppendUvarint(buf, uint64(len(o.Addrs)))
		for j, a := range o.Addrs {
			n := o.Nets[j]
			if len(n) > obsStrMax || len(a) > obsStrMax {
				return fmt.Errorf("a network or address of more than %d bytes", obsStrMax)
			}
			if x, ok := e.nets[n]; ok {
				buf = binary.AppendUvarint(buf, x)
			} else {
				buf = binary.AppendUvarint(buf, 0)
				buf = appendStr(buf, n)
				if len(e.nets) < obsNets {
					e.nets[n] = uint64(len(e.nets)) + 1
				}
			}
			buf = appendStr(buf, a)
		}
	}
	e.buf = buf
	if len(buf) > obsFrameMax {
		return fmt.Errorf("a batch of %d bytes", len(buf))
	}
	var n [binary.MaxVarintLen64]byte
	if _, err := e.w.Write(binary.AppendUvarint(n[:0], uint64(len(buf)))); err != nil {
		return err
	}
	_, err := e.w.Write(buf)
	return err
}

func appendStr(buf []byte, s string) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(s))), s...)
}

// obsDecoder reads batches.
type obsDecoder struct {
	r     *bufio.Reader
	frame []byte // the batch being taken apart
	at    int    // how far
	nets  []string
	obs   []obs  // the last batch's, reused by the next
	ends  []int  // hold's scratch: where each address ends in addrs
	addrs []byte // hold's scratch: its addresses, end to end
}

func newObsDecoder(r io.Reader) *obsDecoder {
	return &obsDecoder{r: bufio.NewReaderSize(r, 256<<10)}
}

// errObs: the stream is not a stream of batches.
var errObs = errors.New("the fleet process's observations are malformed")

// decode reads the next batch. Its Obs slice is reused by the next call:
// the caller copies what it keeps (the strings it may keep). At the end of
// the stream it returns io.EOF; a batch cut short is io.ErrUnexpectedEOF.
func (d *obsDecoder) decode() (obsBatch, error) {
	size, err := binary.ReadUvarint(d.r)
	if err != nil {
		return obsBatch{}, err // io.EOF between batches is the end
	}
	if size > obsFrameMax {
		return obsBatch{}, errObs
	}
	if uint64(cap(d.frame)) < size {
		d.frame = make([]byte, size)
	}
	d.frame, d.at = d.frame[:size], 0
	if _, err := io.ReadFull(d.r, d.frame); err != nil {
		return obsBatch{}, unexpected(err)
	}
	b, err := d.batch()
	if err == nil && d.at != len(d.frame) {
		err = errObs // bytes left over
	}
	return b, err
}

// batch takes the frame apart.
func (d *obsDecoder) batch() (obsBatch, error) {
	b := obsBatch{}
	n, ok := d.uvarint()
	if !ok || n > obsBatchMax {
		return b, errObs
	}
	if b.Upto, ok = d.varint(); !ok {
		return b, errObs
	}
	b.Obs = d.obs[:0]
	prev := int64(0)
	for range n {
		if d.at == len(d.frame) {
			return b, errObs
		}
		var o obs
		o.Kind = d.frame[d.at]
		d.at++
		node, ok1 := d.uvarint()
		task, ok2 := d.uvarint()
		ds, ok3 := d.varint()
		da, ok4 := d.varint()
		if o.Kind > obsRelease || !ok1 || !ok2 || !ok3 || !ok4 || node > 1<<32-1 {
			return b, errObs
		}
		o.Node, o.Task = uint32(node), task
		o.Stamp = prev + ds
		o.At = o.Stamp + da
		prev = o.Stamp
		if o.Kind == obsHold {
			if err := d.hold(&o); err != nil {
				return b, err
			}
		}
		b.Obs = append(b.Obs, o)
	}
	d.obs = b.Obs
	return b, nil
}

func (d *obsDecoder) uvarint() (uint64, bool) {
	v, n := binary.Uvarint(d.frame[d.at:])
	if n <= 0 {
		return 0, false
	}
	d.at += n
	return v, true
}

func (d *obsDecoder) varint() (int64, bool) {
	v, n := binary.Varint(d.frame[d.at:])
	if n <= 0 {
		return 0, false
	}
	d.at += n
	return v, true
}

// str returns the next string's bytes (in the frame).
func (d *obsDecoder) str() ([]byte, bool) {
	n, ok := d.uvarint()
	if !ok || n > obsStrMax || n > uint64(len(d.frame)-d.at) {
		return nil, false
	}
	s := d.frame[d.at : d.at+int(n)]
	d.at += int(n)
	return s, true
}

// hold reads a hold's networks and addresses into o: one slice for both,
// one string for all its addresses, the networks from the table.
func (d *obsDecoder) hold(o *obs) error {
	k, ok := d.uvarint()
	if !ok || k > obsAddrMax {
		return errObs
	}
	if k == 0 {
		return nil
	}
	both := make([]string, 2*k)
	o.Nets, o.Addrs = both[:k:k], both[k:]
	ends, addrs := d.ends[:0], d.addrs[:0]
	for i := range int(k) {
		x, ok := d.uvarint()
		switch {
		case !ok:
			return errObs
		case x == 0:
			s, ok := d.str()
			if !ok {
				return errObs
			}
			n := string(s)
			if len(d.nets) < obsNets {
				d.nets = append(d.nets, n)
			}
			o.Nets[i] = n
		case x <= uint64(len(d.nets)):
			o.Nets[i] = d.nets[x-1]
		default:
			return errObs
		}
		a, ok := d.str()
		if !ok {
			return errObs
		}
		addrs = append(addrs, a...)
		ends = append(ends, len(addrs))
	}
	d.ends, d.addrs = ends, addrs
	all := string(addrs)
	lo := 0
	for i, hi := range ends {
		o.Addrs[i] = all[lo:hi]
		lo = hi
	}
	return nil
}

// unexpected: an end of the stream inside a batch is not its end.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
