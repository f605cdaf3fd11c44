package statemachine

import (
	"encoding/binary"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// AppendResults writes what encoding each field in turn writes, in one
// allocation of that size (its size class), and DecodeResults reads it back.
func TestAppendResultsIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rs := make([]Result, rapid.IntRange(0, 600).Draw(t, "n"))
		for i := range rs {
			rs[i] = Result{
				Code: Code(rapid.IntRange(0, int(numCodes)-1).Draw(t, "code")),
				ID:   rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64Range(0, 1<<14), rapid.Uint64()).Draw(t, "id"),
				Msg:  rapid.SampledFrom([]string{"", "", "", "replay", "node 7 is down: heartbeat first, then report"}).Draw(t, "msg")}
		}
		var want []byte
		want = binary.AppendUvarint(want, uint64(len(rs)))
		for _, r := range rs {
			want = append(want, uint8(r.Code))
			want = binary.AppendUvarint(want, r.ID)
			want = binary.AppendUvarint(want, uint64(len(r.Msg)))
			want = append(want, r.Msg...)
		}
		prefix := []byte(rapid.StringN(0, 3, -1).Draw(t, "prefix"))
		got := AppendResults(slices.Clip(prefix), rs)
		if !slices.Equal(got[len(prefix):], want) || !slices.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("encoding\n%x\nwant\n%x", got, append(prefix, want...))
		}
		// One allocation, of the size class of what it needs (classes
		// are at most a sixth apart).
		if allocs := testing.AllocsPerRun(3, func() { AppendResults(nil, rs) }); allocs != 1 || cap(got) > len(got)+len(got)/4+16 {
			t.Fatalf("%d bytes in room for %d, %v allocations", len(got), cap(got), allocs)
		}
		back, err := DecodeResults(got[len(prefix):])
		if err != nil || !(len(rs) == 0 && len(back) == 0 || slices.Equal(back, rs)) {
			t.Fatalf("decoded %+v (%v), want %+v", back, err, rs)
		}
	})
}
