package wire

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"shoal/internal/varint"
	"shoal/statemachine"
)

// bigAssignments is the COMPLETE of one busy node: n tasks over 40 services
// with long names, most of them terminal (kept until the node's sync
// confirms their release), each with two addresses; one spec per service
// and version.
func bigAssignments(n int, seed uint64) *Assignments {
	a := &Assignments{Kind: FrameComplete, Last: true, AppliesTo: Cursor{90210, 4411, 0, 380},
		ResultsIn: Cursor{90210, 4415, 0, 380}, Seqs: []uint64{0, 77, 0, 12}}
	specs := map[string]bool{}
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		svc := fmt.Sprintf("payments-ledger-reconciliation-worker-%02d", x%40)
		ver := uint32(1 + x%3)
		state, desired := statemachine.StateComplete+statemachine.TaskState(x%4), statemachine.DesiredShutdown
		if i%10 == 0 {
			state, desired = statemachine.StateRunning, statemachine.DesiredRunning
		}
		a.Tasks = append(a.Tasks, Assignment{Task: statemachine.TaskID(1_000_000 + i*7), Service: svc,
			Slot: uint32(i % 500), SpecVersion: ver, Desired: desired, State: state,
			Addresses: []Address{
				{Network: "ingress", Addr: fmt.Sprintf("10.255.%d.%d/16", i/250, i%250+2)},
				{Network: "backend-overlay", Addr: fmt.Sprintf("10.3.%d.%d/16", i/250, i%250+2)}}})
		if key := fmt.Sprint(svc, ver); !specs[key] {
			specs[key] = true
			a.Specs = append(a.Specs, Spec{Service: svc, Version: ver,
				Command: []string{"/usr/local/bin/" + svc, "--config=/etc/ledger/worker.toml", "--log-level=info"},
				Env:     []string{"LEDGER_DB=postgres://ledger-primary:5432/ledger", "REGION=eu-west-1"},
				Dir:     "/srv/ledger", StopGrace: 30e9})
		}
	}
	return a
}

// checkSplit checks the chunks of a: each encodes within maxBytes, only the
// last is Last, each spec arrives in the chunk of the first task that needs
// it or earlier, and the chunks join back into a.
// tb is what checkSplit needs of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}

func checkSplit(t tb, a *Assignments, chunks []*Assignments, maxBytes int) {
	t.Helper()
	sent := map[string]bool{}
	for i, c := range chunks {
		p, err := appendPayload(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		if n := headerLen + varint.UvarintLen(uint64(len(p))) + len(p); n > maxBytes {
			t.Fatalf("chunk %d of %d encodes to %d bytes, over %d", i, len(chunks), n, maxBytes)
		}
		if _, err := Append(nil, c); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if c.Last != (i == len(chunks)-1) {
			t.Fatalf("chunk %d of %d has Last=%v", i, len(chunks), c.Last)
		}
		for _, s := range c.Specs {
			sent[fmt.Sprint(s.Service, s.Version)] = true
		}
		for _, task := range c.Tasks {
			key := fmt.Sprint(task.Service, task.SpecVersion)
			if slices.ContainsFunc(a.Specs, func(s Spec) bool { return fmt.Sprint(s.Service, s.Version) == key }) && !sent[key] {
				t.Fatalf("chunk %d: task %d arrives before its spec %s", i, task.Task, key)
			}
		}
	}
	joined, err := JoinComplete(chunks)
	if err != nil {
		t.Fatal(err)
	}
	// Specs move to the chunk that needs them first: compare them as sets.
	bySpec := func(x, y Spec) int { return strings.Compare(fmt.Sprintf("%#v", x), fmt.Sprintf("%#v", y)) }
	want := *a
	want.Last = true
	want.Specs = slices.SortedStableFunc(slices.Values(a.Specs), bySpec)
	joined.Specs = slices.SortedStableFunc(slices.Values(joined.Specs), bySpec)
	if !reflect.DeepEqual(joined, &want) {
		t.Fatalf("the chunks do not join into the original: %d tasks, %d specs, %d removed; want %d, %d, %d",
			len(joined.Tasks), len(joined.Specs), len(joined.Removed), len(a.Tasks), len(a.Specs), len(a.Removed))
	}
}

func TestSplitTenThousandTasks(t *testing.T) {
	a := bigAssignments(10_000, 7)
	whole, _ := appendPayload(nil, a)
	chunks := SplitComplete(a, 0)
	checkSplit(t, a, chunks, MaxFrame+MaxFrameOverhead)
	if len(chunks) < 2 {
		t.Fatalf("a %d-byte COMPLETE was not split", len(whole))
	}
	var wire int
	for _, c := range chunks {
		b, _ := Append(nil, c)
		wire += len(b)
	}
	t.Logf("10,000 tasks: %d-byte payload in %d chunks, %d bytes on the wire compressed", len(whole), len(chunks), wire)
	for _, max := range []int{64 << 10, 4 << 10} {
		checkSplit(t, a, SplitComplete(a, max), max)
	}
}

// TestSplitProperty: for any COMPLETE and any chunk size that fits its
// largest item (a task with every spec, a spec, a removal), every chunk encodes within the size and the
// chunks join back into the COMPLETE.
func TestSplitProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := drawMessage(t, TypeAssignments).(*Assignments)
		a.Kind, a.Last, a.Logs = FrameComplete, true, nil // a COMPLETE carries no log subscriptions
		// Some tasks use the specs' names, so specs get placed with tasks.
		for i := range a.Tasks {
			if len(a.Specs) > 0 && rapid.Bool().Draw(t, "uses a spec") {
				s := a.Specs[rapid.IntRange(0, len(a.Specs)-1).Draw(t, "spec")]
				a.Tasks[i].Service, a.Tasks[i].SpecVersion = s.Service, s.Version
			}
		}
		fixed, _ := appendPayload(nil, &Assignments{Kind: a.Kind, AppliesTo: a.AppliesTo, ResultsIn: a.ResultsIn, Seqs: a.Seqs, Leader: a.Leader})
		largest := 0
		for _, task := range a.Tasks {
			n := len(appendAssignment(nil, &task))
			for _, s := range a.Specs {
				n += len(appendSpec(nil, &s))
			}
			largest = max(largest, n)
		}
		for _, s := range a.Specs {
			largest = max(largest, len(appendSpec(nil, &s)))
		}
		for _, id := range a.Removed {
			largest = max(largest, varint.UvarintLen(uint64(id)))
		}
		maxBytes := headerLen + 3 + len(fixed) + 6 + largest + rapid.IntRange(0, 300).Draw(t, "slack")
		checkSplit(t, a, SplitComplete(a, maxBytes), maxBytes)
	})
}

func TestSplitIncrementalIsUnchanged(t *testing.T) {
	a := &Assignments{Kind: FrameIncremental, Last: true, Tasks: make([]Assignment, 3)}
	if c := SplitComplete(a, 10); len(c) != 1 || c[0] != a {
		t.Fatalf("an incremental frame was split: %v", c)
	}
}

func TestJoinRefusesMixedChunks(t *testing.T) {
	chunks := SplitComplete(bigAssignments(300, 1), 4<<10)
	chunks[1].ResultsIn = Cursor{1}
	if _, err := JoinComplete(chunks); err == nil {
		t.Fatal("chunks of two COMPLETEs joined")
	}
	if _, err := JoinComplete(chunks[:1]); err == nil {
		t.Fatal("a COMPLETE without its last chunk joined")
	}
}
