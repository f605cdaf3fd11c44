package statemachine

import (
	"bytes"
	"runtime"
	"testing"
)

// allocated returns the bytes the heap allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Property: the room reserved for a capture never changes its bytes, and
// room for the whole encoding spares the doubling buffer's copies (at
// least half the encoding's length fewer bytes allocated).
func TestCanonicalSizedIsCanonical(t *testing.T) {
	// 200,000 tasks: several megabytes, written in 1 MiB flushes.
	s := buildRunning(t, 100, 2000, 200)
	want := s.Canonical()
	for _, hint := range []int{0, 1, len(want) / 3, len(want), 4 * len(want)} {
		if got := s.CanonicalSized(hint); !bytes.Equal(got, want) {
			t.Fatalf("CanonicalSized(%d) differs from Canonical (%d and %d bytes)", hint, len(got), len(want))
		}
	}
	n := uint64(len(want))
	grown := allocated(func() { _ = s.CanonicalSized(0) })
	sized := allocated(func() { _ = s.CanonicalSized(len(want) + len(want)/8) })
	t.Logf("encoding %d bytes: %d allocated from nothing, %d with room for it", n, grown, sized)
	if grown < sized+n/2 {
		t.Fatalf("a capture with room for its %d bytes allocated %d, one from nothing %d: want at least half the encoding saved",
			n, sized, grown)
	}
}
