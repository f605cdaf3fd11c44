package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// seedFrames returns a valid frame of every type, a compressed one and a
// chunk of a COMPLETE.
func seedFrames(tb testing.TB) [][]byte {
	var frames [][]byte
	for _, m := range append(examples, bigAssignments(40, 3), SplitComplete(bigAssignments(80, 4), 5<<10)[1]) {
		b, err := Append(nil, m)
		if err != nil {
			tb.Fatal(err)
		}
		frames = append(frames, b)
	}
	return frames
}

// isSentinel reports whether err wraps one of the package's sentinels.
func isSentinel(err error) bool {
	for _, s := range []error{ErrMalformed, ErrTooLarge, ErrVersion, ErrType, ErrBadCursor} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// FuzzDecode: on any bytes Decode returns a message or a sentinel error
// without panicking; a decoded message encodes again to a frame that decodes
// to the same message, survives JSON, and decodes the same into a reused
// value that held another message of its type.
func FuzzDecode(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b)
	}
	reused := map[MsgType]Message{}
	for _, ex := range examples {
		b, _ := Append(nil, ex)
		reused[ex.Type()], _ = Decode(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		b2, err := Append(nil, m)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", m, err)
		}
		m2, err := Decode(b2)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-encoded message decodes to %#v, %v; want %#v", m2, err, m)
		}
		j, err := EncodeJSON(m)
		if err != nil {
			t.Fatalf("decoded %#v has no JSON: %v", m, err)
		}
		m3, err := DecodeJSON(m.Type(), j)
		if err != nil {
			t.Fatalf("JSON %s does not decode: %v", j, err)
		}
		if b3, _ := Append(nil, m3); !bytes.Equal(b2, b3) {
			t.Fatalf("JSON %s changed the message", j)
		}
		// One value per type is decoded into again and again: DecodeInto
		// must overwrite whatever it held.
		into := reused[m.Type()]
		if err := DecodeInto(b, into); err != nil || !reflect.DeepEqual(into, m) {
			t.Fatalf("DecodeInto a used value: %#v, %v; want %#v", into, err, m)
		}
	})
}

// FuzzParseCursor: on any string ParseCursor returns a cursor or
// ErrBadCursor, and a token it accepts is the token of the cursor it returns.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "AQ", "AQEC", Cursor{1042, 88, 0, 7, 301}.Token(), Cursor{1 << 63}.Token(), "AYAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("error %v is not ErrBadCursor", err)
			}
			return
		}
		if c.Token() != s {
			t.Fatalf("%q parses to %v whose token is %q", s, c, c.Token())
		}
	})
}

// FuzzJSON: on any bytes and type DecodeJSON returns a message or a
// sentinel error; a decoded message encodes to JSON that decodes to the same
// frame, and to a frame unless it is over MaxFrame.
func FuzzJSON(f *testing.F) {
	for _, ex := range examples {
		j, err := EncodeJSON(ex)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(ex.Type()), j)
	}
	f.Add(byte(TypeStatusAck), []byte(`{"results":["accepted"],"messages":["a","b"]}`))
	f.Add(byte(TypeAssignments), []byte(`{"kind":"complete","tasks":[{"task":1,"desired":"run","state":"new"}]}`))
	f.Fuzz(func(t *testing.T, typ byte, b []byte) {
		m, err := DecodeJSON(MsgType(typ), b)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		bin, err := Append(nil, m)
		if errors.Is(err, ErrTooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", m, err)
		}
		j, err := EncodeJSON(m)
		if err != nil {
			t.Fatalf("decoded %#v has no JSON: %v", m, err)
		}
		m2, err := DecodeJSON(m.Type(), j)
		if err != nil {
			t.Fatalf("JSON %s does not decode: %v", j, err)
		}
		if bin2, _ := Append(nil, m2); !bytes.Equal(bin, bin2) {
			t.Fatalf("JSON %s changed the message", j)
		}
		if m3, err := Decode(bin); err != nil {
			t.Fatalf("frame of %#v does not decode: %v", m, err)
		} else if bin3, _ := Append(nil, m3); !bytes.Equal(bin, bin3) {
			t.Fatalf("frame of %#v changed", m)
		}
	})
}

// FuzzNext: on any bytes Next returns a frame and the rest, which together
// are the input, or ErrMalformed; a well-formed stream of frames comes apart
// into frames Decode accepts.
func FuzzNext(f *testing.F) {
	frames := seedFrames(f)
	f.Add(bytes.Join(frames[:3], nil))
	f.Add(bytes.Join(frames, nil))
	f.Add(frames[0][:5])
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			frame, rest, err := Next(b)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v is not ErrMalformed", err)
				}
				return
			}
			if len(frame) == 0 || len(frame)+len(rest) != len(b) || !bytes.Equal(frame, b[:len(frame)]) {
				t.Fatalf("Next(%d bytes) = %d-byte frame and %d bytes left", len(b), len(frame), len(rest))
			}
			if _, err := Decode(frame); err != nil && !isSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			b = rest
		}
	})
}
