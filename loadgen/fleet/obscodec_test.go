package fleet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomBatches is a stream of batches with every field at odds: kinds,
// nodes and tasks up to their limits, stamps rising or not, times far
// from their stamps, holds of none to many addresses on networks seen
// before or not (more of them than the table keeps).
func randomBatches(rng *rand.Rand) []obsBatch {
	pick := func(vals ...int64) int64 { return vals[rng.IntN(len(vals))] }
	var out []obsBatch
	nets := []string{"", "net-000", "a b", "\x00\xff", "ünï"}
	for range 1 + rng.IntN(20) {
		b := obsBatch{Upto: pick(0, -1, math.MaxInt64, math.MinInt64, rng.Int64())}
		for range rng.IntN(200) {
			o := obs{Kind: uint8(rng.IntN(3)), Node: uint32(pick(0, 1, math.MaxUint32, rng.Int64N(10000))),
				Task:  uint64(pick(0, 1, math.MaxInt64, rng.Int64())) * uint64(1+rng.IntN(2)),
				Stamp: pick(0, math.MaxInt64, math.MinInt64, 1_700_000_000_000_000_000+rng.Int64N(1e12)),
				At:    pick(0, math.MaxInt64, math.MinInt64, 1_700_000_000_000_000_000+rng.Int64N(1e12))}
			if o.Kind == obsHold {
				for range rng.IntN(6) {
					n := nets[rng.IntN(len(nets))]
					if rng.IntN(5) == 0 {
						n = fmt.Sprintf("net-%d", rng.IntN(6000))
					}
					o.Nets = append(o.Nets, n)
					o.Addrs = append(o.Addrs, fmt.Sprintf("10.%d.%d.%d/%d", rng.IntN(256), rng.IntN(256), rng.IntN(256), rng.IntN(33)))
				}
				if rng.IntN(7) == 0 {
					o.Nets = append(o.Nets, "")
					o.Addrs = append(o.Addrs, "")
				}
			}
			b.Obs = append(b.Obs, o)
		}
		out = append(out, b)
	}
	return out
}

// Property: what the fleet process encodes the loadgen decodes as it was,
// batch by batch, over a stream's life (its table of networks filling
// past what it keeps); a stream cut anywhere inside a batch ends in an
// error, never in a batch that was not sent.
func TestObservationFramingRoundTrips(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		sent := randomBatches(rng)
		if seed == 0 { // more networks than the table keeps, each seen twice
			var b obsBatch
			for i := range obsNets + 500 {
				for range 2 {
					b.Obs = append(b.Obs, obs{Kind: obsHold, Nets: []string{fmt.Sprint("n", i)}, Addrs: []string{fmt.Sprint(i)}})
				}
			}
			sent = append(sent, b)
		}
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		enc := newObsEncoder(bw)
		var ends []int // where each batch ends in the stream
		for _, b := range sent {
			if err := enc.encode(b); err != nil {
				t.Fatalf("seed %d: encode: %v", seed, err)
			}
			if err := bw.Flush(); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, buf.Len())
		}
		stream := buf.Bytes()
		dec := newObsDecoder(bytes.NewReader(stream))
		for i, want := range sent {
			got, err := dec.decode()
			if err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, i, err)
			}
			if len(want.Obs) == 0 {
				want.Obs = got.Obs[:0] // nil and empty are the same batch
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d batch %d: decoded\n%+v\nsent\n%+v", seed, i, got, want)
			}
		}
		if _, err := dec.decode(); err != io.EOF {
			t.Fatalf("seed %d: after the last batch: %v, want the end", seed, err)
		}
		// Cut inside a batch: every batch before the cut comes out as sent,
		// then an error that is not the end.
		cut := rng.IntN(len(stream))
		dec = newObsDecoder(bytes.NewReader(stream[:cut]))
		for i := range sent {
			_, err := dec.decode()
			if ends[i] <= cut {
				if err != nil {
					t.Fatalf("seed %d: batch %d before the cut at %d: %v", seed, i, cut, err)
				}
				continue
			}
			if i > 0 && ends[i-1] == cut {
				if err != io.EOF {
					t.Fatalf("seed %d: cut between batches: %v, want the end", seed, err)
				}
			} else if err == nil || err == io.EOF {
				t.Fatalf("seed %d: batch %d cut at %d decoded (%v)", seed, i, cut, err)
			}
			break
		}
	}
}

// A stream that is not one (a kind out of range, a network index past the
// table, a count past its bound) ends in an error, without allocating what
// it claims.
func TestObservationFramingRefusesGarbage(t *testing.T) {
	frame := func(body ...byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(body))), body...) }
	for name, stream := range map[string][]byte{
		"kind":        frame(1, 0, 9, 0, 0, 0, 0),
		"network":     frame(1, 0, obsHold, 0, 0, 0, 0, 1, 3, 1, 'a'),
		"count":       frame(0xff, 0xff, 0xff, 0xff, 0x0f, 0),
		"addresses":   frame(1, 0, obsHold, 0, 0, 0, 0, 0xff, 0xff, 0x03),
		"string size": frame(1, 0, obsHold, 0, 0, 0, 0, 1, 0, 0xff, 0xff, 0x03),
		"string past": frame(1, 0, obsHold, 0, 0, 0, 0, 1, 0, 1, 'n', 5, 'a'),
		"fewer":       frame(2, 0, obsHanded, 0, 0, 0, 0),
		"left over":   frame(1, 0, obsHanded, 0, 0, 0, 0, 0),
		"frame size":  binary.AppendUvarint(nil, obsFrameMax+1),
	} {
		_, err := newObsDecoder(bytes.NewReader(stream)).decode()
		if !errors.Is(err, errObs) {
			t.Errorf("%s: %v, want the malformed stream's error", name, err)
		}
	}
}

// BenchmarkObservationDecode: a chunk of ramp observations (handed, hold
// with one address, in turns) decoded by the loadgen, per observation.
func BenchmarkObservationDecode(b *testing.B) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	enc := newObsEncoder(bw)
	batch := obsBatch{Upto: 1_700_000_000_000_000_000 + obsChunk*1000}
	for i := range obsChunk {
		o := obs{Kind: obsHanded, Node: uint32(1 + i%1000), Task: 1688849860264237 + uint64(i),
			Stamp: 1_700_000_000_000_000_000 + int64(i)*1000, At: 1_700_000_000_000_000_000 + int64(i)*1000 - 5000}
		if i%2 == 1 {
			o.Kind, o.Nets, o.Addrs = obsHold, []string{fmt.Sprintf("net-%03d", i%100)}, []string{fmt.Sprintf("10.1.%d.%d/16", i/250, i%250)}
		}
		batch.Obs = append(batch.Obs, o)
	}
	if err := enc.encode(batch); err != nil {
		b.Fatal(err)
	}
	_ = bw.Flush()
	one := bytes.Clone(buf.Bytes())
	rd := &repeatReader{b: one}
	dec := newObsDecoder(rd)
	b.ReportAllocs()
	b.SetBytes(int64(len(one)) / obsChunk)
	n := 0
	for b.Loop() {
		if n%obsChunk == 0 {
			if _, err := dec.decode(); err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
}

// repeatReader reads b over and over.
type repeatReader struct {
	b   []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	return n, nil
}
