package statemachine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// mustCapture is s.CaptureSnapshot, failing tb on an error.
func mustCapture(tb testing.TB, s *State) *SnapshotStream {
	tb.Helper()
	st, err := s.CaptureSnapshot()
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// firstDiff is the first offset where a and b differ (or the shorter's
// length).
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// randomPendingReason is the scheduler's reason for one service's pending
// tasks, which randomCommand does not draw.
func randomPendingReason(rng *rand.Rand, s *State) Command {
	ids := s.ServiceIDs()
	if len(ids) == 0 {
		return Command{Kind: CmdTick}
	}
	svc := s.services[ids[rng.IntN(len(ids))]]
	return Command{Kind: CmdPendingReason, Name: svc.Spec.Name, Seq: uint64(svc.SpecVersion),
		Message: fmt.Sprintf("no node fits (%d)", rng.IntN(3))}
}

// Property: a snapshot streamed in parts while the state goes on applying
// random entries (task reports, placements, syncs, node failures, service
// updates and removals, pending reasons, ticks) is byte for byte the canonical encoding
// the state had at the capture; and the state keeps nothing for it once
// it is closed.
func TestSnapshotStreamIsTheCapturedCanonical(t *testing.T) {
	streams := 0
	for seed := uint64(1); seed <= 80; seed++ {
		rng := rand.New(rand.NewPCG(seed, 35))
		live := New(Config{Group: 1})
		var out Output
		now := int64(1e9)
		live.Apply([]Command{
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 1, Name: "n1"}},
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 2, Name: "n2"}},
			{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 3, Name: "n3"}},
			{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.1.0.0/28"}},
		}, 1, now, &out)
		var st *SnapshotStream
		var want, got []byte
		for i := uint64(2); i < 400; i++ {
			if st == nil && rng.IntN(8) == 0 {
				want = live.Canonical()
				st = mustCapture(t, live)
				st.chunk = 1 + rng.IntN(400)
				got = nil
			}
			now += int64(rng.IntN(15)) * 1e9
			batch := make([]Command, 1+rng.IntN(3))
			for j := range batch {
				batch[j] = randomCommand(rng, live)
				if rng.IntN(10) == 0 {
					batch[j] = randomPendingReason(rng, live)
				}
			}
			live.Apply(batch, i, now, &out)
			for k := rng.IntN(3); st != nil && k > 0; k-- {
				var last bool
				var err error
				got, last, err = st.Next(got)
				if err != nil {
					t.Fatalf("seed %d entry %d: %v", seed, i, err)
				}
				if !last {
					continue
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d entry %d: the stream (%d bytes) differs from the encoding at its capture (%d bytes) from byte %d",
						seed, i, len(got), len(want), firstDiff(got, want))
				}
				st.Close()
				if live.capture != nil {
					t.Fatalf("seed %d: a closed stream is still the state's capture", seed)
				}
				st = nil
				streams++
			}
		}
	}
	if streams < 200 {
		t.Fatalf("only %d streams finished: the property is barely exercised", streams)
	}
}

// The compressed snapshot a stream writes is the one SaveCanonical writes
// for the encoding at the capture, whatever the parts' sizes; a state that
// changes every task meanwhile does not show in it.
func TestSaveStreamEqualsSaveCanonical(t *testing.T) {
	s := buildRunning(t, 4, 500, 20)
	canon := s.Canonical()
	var want bytes.Buffer
	if err := SaveCanonical(&want, canon); err != nil {
		t.Fatal(err)
	}
	for k, chunk := range []int{1, 700, 1 << 14, streamChunk} {
		st := mustCapture(t, s)
		st.chunk = chunk
		var got bytes.Buffer
		first := true
		err := SaveStream(&got, func(buf []byte) ([]byte, bool, error) {
			if first {
				first = false
				// A node's tasks stop while the first part is written.
				var out Output
				s.Apply([]Command{{Kind: CmdSetNodeStatus, Node: NodeID(1 + k), NodeStatus: NodeDown}}, s.LastIndex()+1, s.lastTime+1, &out)
			}
			return st.Next(buf)
		})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("parts of %d bytes: the saved stream (%d bytes) differs from SaveCanonical's (%d bytes)", chunk, got.Len(), want.Len())
		}
		canon = s.Canonical()
		want.Reset()
		if err := SaveCanonical(&want, canon); err != nil {
			t.Fatal(err)
		}
	}
}

// A new capture ends the stream before it: its next part is an error, not
// a mix of two states.
func TestCaptureEndsTheStreamBefore(t *testing.T) {
	s := buildRunning(t, 1, 10, 2)
	old := mustCapture(t, s)
	if _, _, err := old.Next(nil); err != nil {
		t.Fatal(err)
	}
	cur := mustCapture(t, s)
	if _, _, err := old.Next(nil); err == nil {
		t.Fatal("a stream ended by a later capture went on")
	}
	old.Close()
	if s.capture != cur {
		t.Fatal("closing an ended stream dropped the current one")
	}
	cur.Close()
}

// A part stays about its size when the tasks it covers were deleted after
// the capture (their encodings are kept apart from the live tasks): a big
// removal during a save does not make one part of every deleted task.
func TestStreamPartsStayTheirSizeAfterDeletions(t *testing.T) {
	s := buildRunning(t, 2, 400, 4)
	want := s.Canonical()
	st := mustCapture(t, s)
	defer st.Close()
	const chunk = 600
	st.chunk = chunk
	biggest := 0
	var tasks []*Task
	for _, tk := range s.tasks.all() {
		tasks = append(tasks, tk)
		var e encoder
		encodeTask(&e, tk)
		biggest = max(biggest, len(e.b))
	}
	for _, tk := range tasks {
		s.deleteTask(tk, true)
	}
	var got []byte
	parts := 0
	for {
		before, tasksPart := len(got), st.stage == 1
		var last bool
		var err error
		got, last, err = st.Next(got)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got) - before; tasksPart && n > chunk+biggest {
			t.Fatalf("a part holds %d bytes of deleted tasks, want at most %d and one task (%d)", n, chunk, biggest)
		}
		if tasksPart {
			parts++
		}
		if last {
			break
		}
	}
	if parts < 2 {
		t.Fatalf("the tasks came in %d part(s): the test needs more than one", parts)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the stream (%d bytes) differs from the encoding at its capture (%d bytes) from byte %d", len(got), len(want), firstDiff(got, want))
	}
}
