package wire

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"shoal/statemachine"
)

// statusBatch returns a batch of n reports whose messages repeat three texts.
func statusBatch(n int) *StatusBatch {
	b := &StatusBatch{NodeID: 17, SessionID: 9061852}
	msgs := []string{"", "exit status 1", "killed by the OOM killer"}
	for i := range n {
		b.Reports = append(b.Reports, StatusReport{Task: statemachine.TaskID(1_000_000 + 7*i),
			State: statemachine.StateRunning + statemachine.TaskState(i%4), ExitCode: int32(i % 3),
			Message: msgs[i%3], At: 1767225600000000000 + int64(i)*1e6})
	}
	return b
}

// TestAllocs guards the hot paths' allocations:
//   - encoding a StatusBatch into a buffer with room: 0 allocations,
//     compressed (over 4 KiB) or not;
//   - decoding one into a reused value: at most one allocation per distinct
//     message text (the three texts here make two allocations, "" is free),
//     plus one for the decompression buffer when compressed.
func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	for _, c := range []struct {
		reports        int
		encode, decode float64
		wantCompressed bool
	}{
		{reports: 50, encode: 0, decode: 2},
		{reports: 1000, encode: 0, decode: 3, wantCompressed: true},
	} {
		t.Run(fmt.Sprint(c.reports), func(t *testing.T) {
			m := statusBatch(c.reports)
			buf, err := Append(make([]byte, 0, 2*MaxFrame), m)
			if err != nil {
				t.Fatal(err)
			}
			if got := buf[len(magic)+2]&flagZstd != 0; got != c.wantCompressed {
				t.Fatalf("%d-byte frame compressed=%v", len(buf), got)
			}
			frame := append([]byte(nil), buf...)
			if n := testing.AllocsPerRun(50, func() { buf, _ = Append(buf[:0], m) }); n > c.encode {
				t.Errorf("Append of %d reports: %.1f allocations, want ≤ %.0f", c.reports, n, c.encode)
			}
			var into StatusBatch
			if err := DecodeInto(frame, &into); err != nil {
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(50, func() { _ = DecodeInto(frame, &into) }); n > c.decode {
				t.Errorf("DecodeInto of %d reports: %.1f allocations, want ≤ %.0f", c.reports, n, c.decode)
			}
		})
	}
}

// TestNoGoroutines: encoding and decoding, compressed or not, leaves the
// number of goroutines as it was (wire and its zstd coders start none).
func TestNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, m := range append(examples, bigAssignments(3000, 5), statusBatch(1000)) {
		b, err := Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(b); err != nil {
			t.Fatal(err)
		}
	}
	if after := runtime.NumGoroutine(); after != before {
		t.Fatalf("%d goroutines before encoding and decoding, %d after", before, after)
	}
}

// TestLyingCountsAllocateLittle: a small frame whose list counts claim far
// more entries than it holds is refused without allocating for them.
func TestLyingCountsAllocateLittle(t *testing.T) {
	big := []byte{0xff, 0xff, 0x3f} // 1,048,575 entries
	for name, frame := range map[string][]byte{
		"ids":     mustFrame(t, TypeSyncAnswer, append(big, 1, 2, 3)),
		"reports": mustFrame(t, TypeStatusBatch, append([]byte{1, 1}, append(big, 1, 1)...)),
		"tasks":   mustFrame(t, TypeAssignments, append([]byte{1, 0, 0, 0, 0, 0}, append(big, 1, 1)...)),
		"strings": mustFrame(t, TypeSession, append([]byte{1, 1, 1, 1}, append(big, 1, 'a')...)),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Decode(frame)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: a frame with a lying count decoded", name)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
			t.Errorf("%s: decoding a %d-byte frame allocated %d bytes", name, len(frame), n)
		}
	}
}

// TestAssignmentsDecodeAllocs guards the agent's path: decoding a 10-task
// incremental answer into a new value (as the agent does, keeping the
// tasks) and into a reused one. A frame's strings share one allocation and
// its tasks' addresses one slab, instead of one per string and per task.
func TestAssignmentsDecodeAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	frame, err := Append(nil, incrementalAssignments(10))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() { _, _ = DecodeAs[Assignments](frame) }); n > 10 {
		t.Errorf("decoding 10 tasks into a new value: %.0f allocations, want ≤ 10", n)
	}
	var into Assignments
	if n := testing.AllocsPerRun(50, func() { _ = DecodeInto(frame, &into) }); n > 1 {
		t.Errorf("decoding 10 tasks into a reused value: %.0f allocations, want ≤ 1", n)
	}
}

// TestDecodedAddressesAreIndependent: the tasks of one frame share storage
// for their addresses, and its cursors and sequences for their numbers, yet
// appending to one list leaves every other as decoded.
func TestDecodedAddressesAreIndependent(t *testing.T) {
	want := incrementalAssignments(10)
	frame, err := Append(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAs[Assignments](frame)
	if err != nil {
		t.Fatal(err)
	}
	got.AppliesTo = append(got.AppliesTo, 1)
	got.ResultsIn = append(got.ResultsIn, 2)
	if !reflect.DeepEqual(got.ResultsIn[:len(got.ResultsIn)-1], want.ResultsIn) || !reflect.DeepEqual(got.Seqs, want.Seqs) {
		t.Fatalf("results_in %v and seqs %v after appending to the cursors, want %v and %v", got.ResultsIn, got.Seqs, want.ResultsIn, want.Seqs)
	}
	for i := range got.Tasks {
		got.Tasks[i].Addresses = append(got.Tasks[i].Addresses, Address{Network: "added", Addr: "10.9.9.9/8"})
	}
	for i := range got.Tasks {
		as := got.Tasks[i].Addresses
		if !reflect.DeepEqual(as[:len(as)-1], want.Tasks[i].Addresses) {
			t.Fatalf("task %d: addresses %v after appending to every task's, want %v and the added one", i, as, want.Tasks[i].Addresses)
		}
	}
}
