package ipam

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

// opsFromBytes turns fuzz input into a pool config and an operation list:
// three config bytes, then seven bytes per operation, at most 400 of them.
func opsFromBytes(data []byte) (Config, []op) {
	if len(data) < 3 {
		return Config{}, nil
	}
	bits := MinPrefixBits + 16 + int(data[0])%(MaxPrefixBits-MinPrefixBits-15) // /24 to /30
	c := Config{
		Subnet:    netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, 0, 0}), bits),
		BlockSize: []uint32{0, 4, 8, 16, 64}[data[1]%5],
	}
	if data[2]&1 != 0 {
		size := uint32(1) << (32 - bits)
		first := uint32(data[2]>>1) % size
		c.Reserved = []Range{{u32Addr(addrU32(c.Subnet.Addr()) + first), u32Addr(addrU32(c.Subnet.Addr()) + min(first+3, size-1))}}
	}
	var ops []op
	for b := data[3:]; len(b) >= 7 && len(ops) < 400; b = b[7:] {
		o := op{
			kind:  opKind(b[0] % byte(numOps)),
			owner: uint32(b[1] % 4),
			id:    uint64(b[2] % 7),
			pick:  uint32(b[3]) | uint32(b[4])<<8,
			node:  1 + uint32(b[5]%3),
			seq:   uint64(b[6] % 16),
			keep:  b[5] >> 6,
		}
		ops = append(ops, o)
	}
	return c, ops
}

func FuzzPoolOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 9})
	f.Add([]byte("\x03\x02\x05" + "\x08\x01\x00\x00\x00\x00\x00" + "\x00\x01\x03\x00\x00\x00\x00" + "\x03\x01\x00\x00\x00\x01\x04" +
		"\x0b\x00\x00\x00\x00\x00\x00" + "\x05\x00\x00\x00\x00\x01\x06" + "\x0a\x01\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		c, ops := opsFromBytes(data)
		h, err := newHarness(c)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New(%+v): %v", c, err)
			}
			return
		}
		for i, o := range ops {
			s := h.apply(o)
			for _, prop := range properties[:5] { // the round-trip property runs as an op
				if err := prop.check(h, s); err != nil {
					t.Fatalf("step %d %v: %s: %v", i, o, prop.name, err)
				}
			}
		}
	})
}

// fuzzSeedPools returns encodings of a few pools in varied states.
func fuzzSeedPools(t testing.TB) [][]byte {
	var out [][]byte
	add := func(p *Pool) {
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	p := newTestPool(t, "10.0.0.0/30", 0)
	add(p)
	p, _ = New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/24"), BlockSize: 16, Gateway: mustAddr("10.0.0.254"),
		Reserved: []Range{{mustAddr("10.0.0.20"), mustAddr("10.0.0.29")}}})
	p.LeaseBlock(3)
	p.LeaseBlock(1)
	for i := range uint64(40) {
		a, _ := p.Allocate(uint32(i%2)*3, i+1)
		if i%3 == 0 {
			p.Release(a, i+1, uint32(i%4), i)
		}
	}
	p.AllocateVIP(0, 99)
	add(p)
	return out
}

func FuzzUnmarshal(f *testing.F) {
	for _, b := range fuzzSeedPools(f) {
		f.Add(b)
	}
	f.Add([]byte("IPAM\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Pool
		if err := p.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := p.CheckInvariants(); err != nil {
			t.Fatalf("decoded pool is inconsistent: %v", err)
		}
		b1, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var q Pool
		if err := q.UnmarshalBinary(b1); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if b2, _ := q.MarshalBinary(); !bytes.Equal(b1, b2) {
			t.Fatal("encoding not stable")
		}
		// The decoded pool must keep working.
		if a, err := p.Allocate(0, 1); err == nil {
			if err := p.Release(a, 1, 1, 1); err != nil {
				t.Fatal(err)
			}
			p.ExpireNode(1)
		}
		if err := p.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUnmarshalTruncatedAndFlipped(t *testing.T) {
	for _, enc := range fuzzSeedPools(t) {
		var p Pool
		if err := p.UnmarshalBinary(enc); err != nil {
			t.Fatalf("own encoding: %v", err)
		}
		for n := range len(enc) {
			if err := p.UnmarshalBinary(enc[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated at %d of %d: %v", n, len(enc), err)
			}
		}
		if err := p.UnmarshalBinary(append(bytes.Clone(enc), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing byte accepted: %v", err)
		}
		for i := range enc {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				b := bytes.Clone(enc)
				b[i] ^= x
				var q Pool
				if q.UnmarshalBinary(b) == nil {
					if err := q.CheckInvariants(); err != nil {
						t.Fatalf("flip %d^%#x decoded into a broken pool: %v", i, x, err)
					}
				}
			}
		}
	}
}

func TestMarshalDeterministic(t *testing.T) {
	build := func() *Pool {
		p, _ := New(Config{Name: "det", Subnet: netip.MustParsePrefix("10.2.0.0/22"), BlockSize: 32})
		for o := uint32(1); o <= 5; o++ {
			p.LeaseBlock(o)
		}
		for i := range uint64(300) {
			a, err := p.Allocate(uint32(i%6), i+1)
			if errors.Is(err, ErrExhausted) && i%6 != 0 {
				p.LeaseBlock(uint32(i % 6))
				a, err = p.Allocate(uint32(i%6), i+1)
			}
			if err != nil {
				t.Fatal(err)
			}
			switch i % 5 {
			case 0, 1:
				p.Release(a, i+1, uint32(i%7), i/3)
			case 2:
				p.AllocateVIP(uint32(i%6), 1000+i%9)
			}
		}
		return p
	}
	p := build()
	want, _ := p.MarshalBinary()
	for range 20 { // map iteration order must not leak into the bytes
		if got, _ := p.MarshalBinary(); !bytes.Equal(got, want) {
			t.Fatal("MarshalBinary differs between calls")
		}
	}
	if got, _ := build().MarshalBinary(); !bytes.Equal(got, want) {
		t.Fatal("the same history gives different bytes")
	}
	var q Pool
	if err := q.UnmarshalBinary(want); err != nil {
		t.Fatal(err)
	}
	checkPool(t, &q)
	if got, _ := q.MarshalBinary(); !bytes.Equal(got, want) {
		t.Fatal("decode-encode changes the bytes")
	}
	// The decoded pool continues exactly as the original.
	for i := range uint64(50) {
		a1, e1 := p.Allocate(uint32(i%6), 5000+i)
		a2, e2 := q.Allocate(uint32(i%6), 5000+i)
		if a1 != a2 || (e1 == nil) != (e2 == nil) {
			t.Fatalf("step %d: original %s %v, decoded %s %v", i, a1, e1, a2, e2)
		}
	}
}
