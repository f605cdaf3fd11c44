package wire

import (
	"errors"
	"testing"

	"shoal/statemachine"
)

// Property: frames appended back to back come apart again, one by one, and
// a stream cut anywhere inside a frame is refused, never misread.
func TestNextSplitsFrames(t *testing.T) {
	var b []byte
	var err error
	msgs := []Message{&Heartbeat{NodeID: 3, SessionID: 9}, &SyncAnswer{Destroy: []statemachine.TaskID{1, 2, 3}}}
	for _, m := range msgs {
		if b, err = Append(b, m); err != nil {
			t.Fatal(err)
		}
	}
	rest := b
	for i := range msgs {
		var f []byte
		if f, rest, err = Next(rest); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got, err := Decode(f); err != nil || got.Type() != msgs[i].Type() {
			t.Fatalf("frame %d decodes to %v, %v", i, got, err)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left over", len(rest))
	}
	first, _, _ := Next(b)
	for cut := 1; cut < len(first); cut++ {
		if _, _, err := Next(b[:cut]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d inside the first frame: err = %v", cut, err)
		}
	}
}
