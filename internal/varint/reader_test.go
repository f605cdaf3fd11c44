package varint

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errMine = errors.New("mine: corrupt")

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = append(b, 1)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.AppendUvarint(b, 2)
	b = append(b, 7, 8)
	r := NewReader(b, errMine)
	if v := r.Uvarint("u"); v != 300 {
		t.Fatalf("Uvarint = %d", v)
	}
	if v := r.Varint("i"); v != -5 {
		t.Fatalf("Varint = %d", v)
	}
	if !r.Bool("b") {
		t.Fatal("Bool = false")
	}
	if s := r.String("s"); s != "abc" {
		t.Fatalf("String = %q", s)
	}
	if n := r.Count(1, "n"); n != 2 {
		t.Fatalf("Count = %d", n)
	}
	if got := r.Take(2, "x"); string(got) != "\x07\x08" || r.Len() != 0 || r.Err() != nil {
		t.Fatalf("Take = %v, Len %d, Err %v", got, r.Len(), r.Err())
	}
}

func TestErrorsStickAndWrap(t *testing.T) {
	r := NewReader([]byte{0x80}, errMine) // an unterminated varint
	if v := r.Uvarint("u"); v != 0 || !errors.Is(r.Err(), errMine) {
		t.Fatalf("Uvarint = %d, Err %v", v, r.Err())
	}
	first := r.Err()
	r.Byte("b")
	if r.Err() != first {
		t.Fatalf("the first error must stick, got %v", r.Err())
	}
	r = NewReader(binary.AppendUvarint(nil, 1<<40), nil)
	if n := r.Count(1, "n"); n != 0 || !errors.Is(r.Err(), ErrCorrupt) {
		t.Fatalf("huge count = %d, Err %v", n, r.Err())
	}
	r = NewReader(binary.AppendUvarint(nil, 9), nil)
	if v := r.Bounded(8, "v"); v != 0 || r.Err() == nil {
		t.Fatalf("Bounded = %d, Err %v", v, r.Err())
	}
}

func FuzzReaderNeverPanics(f *testing.F) {
	f.Add([]byte{0x80, 0x80, 0x01, 3, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b, nil)
		for r.Err() == nil && r.Len() > 0 {
			_ = r.String("s")
			_ = r.Count(2, "n")
			_ = r.Varint("i")
			_ = r.Bool("b")
			_ = r.Bounded(1000, "v")
		}
	})
}

func TestUvarintLen(t *testing.T) {
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1<<32 - 1, 1<<63 - 1, 1<<64 - 1} {
		if got, want := UvarintLen(v), len(binary.AppendUvarint(nil, v)); got != want {
			t.Errorf("UvarintLen(%#x) = %d, want %d", v, got, want)
		}
	}
}

// Limit and Unlimit read a nested element: its end is the reader's end,
// and what the element holds past the fields read is skipped.
func TestLimit(t *testing.T) {
	b := binary.AppendUvarint(nil, 3)
	b = append(b, 7, 8, 9) // the element: 7, then a field read by no one
	b = append(b, 42)
	r := NewReader(b, errMine)
	outer := r.Limit(r.Uvarint("len"), "element")
	if v := r.Uvarint("a"); v != 7 || r.Len() != 2 {
		t.Fatalf("read %d with %d left; want 7 with 2", v, r.Len())
	}
	r.Unlimit(outer)
	if v := r.Uvarint("b"); v != 42 || r.Len() != 0 || r.Err() != nil {
		t.Fatalf("after the element: %d, %d left, %v; want 42, 0, nil", v, r.Len(), r.Err())
	}
	r = NewReader([]byte{5, 1}, errMine)
	outer = r.Limit(r.Uvarint("len"), "element")
	if r.Len() != 0 || !errors.Is(r.Err(), errMine) {
		t.Fatalf("a length past the end: %d left, %v", r.Len(), r.Err())
	}
	r.Unlimit(outer)
}
