package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"shoal/statemachine"
)

// TestBinaryRoundTrip: every message Append writes decodes to a message
// equal to the one encoded.
func TestBinaryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage.Draw(t, "m")
		b, err := Append(nil, m)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("decoded %#v\nencoded %#v", got, m)
		}
	})
}

// TestBinaryJSONRoundTrip: binary → value → JSON → value → binary gives the
// same bytes, and both values are equal.
func TestBinaryJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b1, err := Append(nil, genMessage.Draw(t, "m"))
		if err != nil {
			t.Fatal(err)
		}
		v1, err := Decode(b1)
		if err != nil {
			t.Fatal(err)
		}
		j, err := EncodeJSON(v1)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := DecodeJSON(v1.Type(), j)
		if err != nil {
			t.Fatalf("DecodeJSON(%s): %v", j, err)
		}
		b2, err := Append(nil, v2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("JSON %s changed the frame:\n%x\n%x", j, b1, b2)
		}
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("JSON %s changed the value:\n%#v\n%#v", j, v1, v2)
		}
	})
}

// TestDecodeIntoReusedValue: decoding into a value that held another message
// of the same type gives the same result as decoding into a new one.
func TestDecodeIntoReusedValue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := MsgType(rapid.IntRange(int(TypeError), int(numMsgTypes)-1).Draw(t, "type"))
		old, m := drawMessage(t, typ), drawMessage(t, typ)
		b1, _ := Append(nil, old)
		b2, err := Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		into := New(typ)
		if err := DecodeInto(b1, into); err != nil {
			t.Fatal(err)
		}
		if err := DecodeInto(b2, into); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(into, m) {
			t.Fatalf("reused value decoded to %#v\nwant %#v", into, m)
		}
	})
}

// TestTruncatedFramesFail: every proper prefix of a valid frame is refused.
func TestTruncatedFramesFail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, _ := Append(nil, genMessage.Draw(t, "m"))
		n := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		if _, err := Decode(b[:n]); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte frame decoded", n, len(b))
		}
	})
}

// TestNewerSenderFieldsAreSkipped: bytes appended to the end of a payload (a
// newer sender's fields) do not change what an older reader decodes.
func TestNewerSenderFieldsAreSkipped(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage.Draw(t, "m")
		extra := rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "extra")
		p, err := appendPayload(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got := New(m.Type())
		if err := decodePayload(append(p, extra...), got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("trailing bytes changed the message: %#v", got)
		}
	})
}

func TestNestedStructsSkipNewerFields(t *testing.T) {
	// A newer agent's status report with one more field after At.
	r := StatusReport{Task: 9, State: statemachine.StateRunning, Message: "up", At: 5}
	el := appendReport(nil, &r)
	el = append(el[1:], 0x2a, 0x2a) // drop the length prefix, add a field
	p := []byte{17, 1, 1}           // node 17, session 1, one report
	p = append(p, byte(len(el)))
	p = append(p, el...)
	var b StatusBatch
	if err := decodePayload(p, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Reports) != 1 || b.Reports[0] != r {
		t.Fatalf("got %+v, want one report %+v", b.Reports, r)
	}
}

// TestOlderSenderFieldsAreZero: a nested struct cut short after any field
// (an older sender's) decodes with the missing fields zero, even into a
// value that held a full one.
func TestOlderSenderFieldsAreZero(t *testing.T) {
	full := Assignment{Task: 9, Service: "web", Slot: 3, SpecVersion: 2, Desired: statemachine.DesiredRunning,
		State: statemachine.StateRunning, Addresses: []Address{{Network: "front", Addr: "10.0.0.9/24"}}}
	el := appendAssignment(nil, &full)[1:]
	decoded := 0
	for cut := range len(el) + 1 {
		// A COMPLETE with no cursors, sequences or specs, and one task.
		frame := mustFrame(t, TypeAssignments, append([]byte{1, 0, 0, 0, 0, 0, 1, byte(cut)}, el[:cut]...))
		fresh, err := Decode(frame)
		if err != nil {
			continue // cut inside a field
		}
		decoded++
		reused := &Assignments{Tasks: []Assignment{full}}
		if err := DecodeInto(frame, reused); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fresh, reused) {
			t.Errorf("cut at %d: decoded into a used value %+v, into a new one %+v", cut, reused.Tasks, fresh.(*Assignments).Tasks)
		}
	}
	if decoded < 7 {
		t.Errorf("only %d cuts decoded; the test no longer cuts between fields", decoded)
	}
}

func TestCompressedFrames(t *testing.T) {
	a := bigAssignments(2000, 1)
	b, err := Append(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	if b[len(magic)+2]&flagZstd == 0 {
		t.Fatalf("a %d-byte frame was not compressed", len(b))
	}
	p, _ := appendPayload(nil, a)
	t.Logf("%d tasks: payload %d bytes, frame %d bytes", len(a.Tasks), len(p), len(b))
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatal("compressed frame decoded differently")
	}
	// A frame that claims a different payload size is refused.
	bad := bytes.Clone(b)
	_, w := binary.Uvarint(b[headerLen:])
	bad[headerLen+w]++ // the first byte of the payload size
	if _, err := Decode(bad); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a frame with a wrong payload size decoded: %v", err)
	}
}

func TestSmallPayloadsAreNotCompressed(t *testing.T) {
	for _, m := range examples {
		b, _ := Append(nil, m)
		if b[len(magic)+2] != 0 {
			t.Errorf("%s: a %d-byte frame is compressed", m.Type(), len(b))
		}
	}
}

func TestTooLarge(t *testing.T) {
	m := &SyncAnswer{Destroy: make([]statemachine.TaskID, MaxFrame)} // one byte each, plus the count
	dst := []byte("keep")
	out, err := Append(dst, m)
	if !errors.Is(err, ErrTooLarge) || string(out) != "keep" {
		t.Fatalf("Append of %d IDs: %q, %v", len(m.Destroy), out[:min(len(out), 8)], err)
	}
	if !strings.Contains(err.Error(), "over the 1 MiB limit") {
		t.Errorf("error %q does not say the limit", err)
	}
	m.Destroy = m.Destroy[:MaxFrame-4]
	if _, err := Append(nil, m); err != nil {
		t.Fatalf("a payload of exactly MaxFrame bytes: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	valid, _ := Append(nil, &Heartbeat{NodeID: 1, SessionID: 2})
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"json", []byte(`{"node_id":1}`), ErrMalformed},
		{"magic", append([]byte("SHX"), valid[3:]...), ErrMalformed},
		{"version", append([]byte("SHW\x02"), valid[4:]...), ErrVersion},
		{"type 0", append([]byte("SHW\x01\x00"), valid[5:]...), ErrType},
		{"type 99", append([]byte("SHW\x01\x63"), valid[5:]...), ErrType},
		{"flags", append([]byte("SHW\x01\x04\x02"), valid[6:]...), ErrVersion},
		{"trailing", append(bytes.Clone(valid), 0), ErrMalformed},
		{"huge length", []byte("SHW\x01\x04\x00\xff\xff\xff\x0f"), ErrTooLarge},
		{"bad state", mustFrame(t, TypeStatusBatch, []byte{1, 1, 1, 3, 1, 99, 0}), ErrMalformed},
		{"bad kind", mustFrame(t, TypeAssignments, []byte{3}), ErrMalformed},
		{"count past end", mustFrame(t, TypeSyncAnswer, []byte{0xff, 0xff, 0x03, 1}), ErrMalformed},
		{"list cut short", mustFrame(t, TypeSyncAnswer, []byte{2, 0x81, 0x01}), ErrMalformed},
		{"element list cut short", mustFrame(t, TypeStatusBatch, []byte{1, 1, 2, 1, 7}), ErrMalformed},
		{"node id over 32 bits", mustFrame(t, TypeHeartbeat, []byte{0xff, 0xff, 0xff, 0xff, 0x1f}), ErrMalformed},
		{"not utf-8", mustFrame(t, TypeError, []byte{2, 0xff, 0xfe}), ErrMalformed},
		{"not utf-8 leader", mustFrame(t, TypeError, []byte{0, 0, 0, 2, 0xff, 0xfe}), ErrMalformed},
		{"messages mismatch", mustFrame(t, TypeStatusAck, []byte{2, 0, 0, 1, 0}), ErrMalformed},
	} {
		_, err := Decode(c.b)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if err := DecodeInto(valid, &SyncAnswer{}); !errors.Is(err, ErrType) {
		t.Errorf("DecodeInto a different type: %v", err)
	}
	if _, err := DecodeAs[HeartbeatAck](valid); !errors.Is(err, ErrType) {
		t.Errorf("DecodeAs a different type: %v", err)
	}
	if hb, err := DecodeAs[Heartbeat](valid); err != nil || *hb != (Heartbeat{1, 2}) {
		t.Errorf("DecodeAs: %v %v", hb, err)
	}
	if _, err := Append(nil, &StatusBatch{Reports: []StatusReport{{State: 200}}}); !errors.Is(err, ErrMalformed) {
		t.Errorf("Append of an unnamed state: %v", err)
	}
	if _, err := Append(nil, &Assignments{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("Append of assignments without a kind: %v", err)
	}
}

// mustFrame wraps a hand-written payload in a frame header.
func mustFrame(t *testing.T, typ MsgType, payload []byte) []byte {
	t.Helper()
	b := append([]byte(magic), Version, byte(typ), 0, byte(len(payload)))
	return append(b, payload...)
}

func TestInvalidUTF8IsReplaced(t *testing.T) {
	b, err := Append(nil, &StatusBatch{Reports: []StatusReport{{State: statemachine.StateFailed, Message: "bad \xff byte"}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeAs[StatusBatch](b)
	if err != nil || m.Reports[0].Message != "bad \uFFFD byte" {
		t.Fatalf("got %+v, %v", m, err)
	}
}

func TestErrorMatchesByCode(t *testing.T) {
	var err error = &Error{Code: CodeNotLeader, Message: "not the leader", Leader: "10.0.0.2:7946"}
	if !errors.Is(err, &Error{Code: CodeNotLeader}) || errors.Is(err, &Error{Code: CodeBusy}) {
		t.Error("errors.Is does not match by code")
	}
	if err.Error() != "not the leader" || (&Error{Code: CodeBusy}).Error() != "manager: busy" {
		t.Errorf("texts %q, %q", err.Error(), (&Error{Code: CodeBusy}).Error())
	}
}

func TestEnumNames(t *testing.T) {
	for typ := TypeError; typ < numMsgTypes; typ++ {
		if p, err := ParseMsgType(typ.String()); p != typ || err != nil {
			t.Errorf("%s: %v %v", typ, p, err)
		}
		if New(typ) == nil || New(typ).Type() != typ {
			t.Errorf("New(%s)", typ)
		}
	}
	if _, err := ParseMsgType("hearbeat"); !errors.Is(err, ErrType) {
		t.Errorf("ParseMsgType of a typo: %v", err)
	}
	if MsgType(0).Valid() || New(0) != nil || New(numMsgTypes) != nil {
		t.Error("type 0 or past the last is valid")
	}
	if len(taskStateNames) != 13 || len(desiredNames) != 4 || len(nodeStatusNames) != 4 {
		t.Errorf("the state machine's enums changed: %d states, %d desired, %d node statuses",
			len(taskStateNames), len(desiredNames), len(nodeStatusNames))
	}
	if s, err := ParseTaskState("orphaned"); s != statemachine.StateOrphaned || err != nil {
		t.Errorf("ParseTaskState: %v %v", s, err)
	}
	if _, err := ParseFrameKind(""); err == nil {
		t.Error("an empty frame kind parses")
	}
}

// TestAppendStringBytes: appendString writes the bytes it wrote before its
// ASCII shortcut (the full UTF-8 check, invalid bytes replaced), for any
// bytes, a non-ASCII one at any offset of an eight-byte word included.
func TestAppendStringBytes(t *testing.T) {
	before := func(b []byte, s string) []byte {
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	rapid.Check(t, func(t *rapid.T) {
		s := []byte(rapid.StringMatching(`[ -~]{0,40}`).Draw(t, "ascii"))
		if len(s) > 0 && rapid.Bool().Draw(t, "non-ASCII") {
			at := rapid.IntRange(0, len(s)-1).Draw(t, "at")
			s[at] = rapid.ByteRange(0x80, 0xff).Draw(t, "byte")
			if rapid.Bool().Draw(t, "valid") && at+1 < len(s) {
				copy(s[at:], "é")
			}
		}
		if got, want := appendString(nil, string(s)), before(nil, string(s)); !bytes.Equal(got, want) {
			t.Fatalf("%q encodes as %x, before as %x", s, got, want)
		}
	})
}
