package statemachine

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func encodeOnceBatch() []Command {
	return []Command{
		{Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 3, Networks: []string{"a"}, Constraints: []string{"node.labels.zone==a"},
			Env: []string{"A=1", "B=2"}, Restart: RestartPolicy{Condition: RestartOnFailure, Delay: 5e9},
			Placement: PlacementPolicy{Preferences: []string{"node.labels.zone"}, MaxPerNode: 2, Strategy: StrategyBinPack}}},
		{Kind: CmdTaskStatus, Task: 1<<48 | 7, Node: 3, State: StateFailed, ExitCode: -9, Message: "oom"},
		{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 4, Name: "n4", Labels: map[string]string{"zone": "a", "disk": "ssd"}}},
		{Kind: CmdAssign, Task: 9, Node: 4},
		{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "a", Subnet: "10.0.0.0/16"}},
	}
}

// A batch of commands each appended by AppendChecked after
// AppendBatchHeader is the batch AppendBatch writes, the hot kinds
// included; a command the codec cannot carry is refused with what
// CheckEncodable says and leaves the buffer as it was.
func TestAppendCheckedIsTheBatchEncoding(t *testing.T) {
	batch := encodeOnceBatch()
	got := AppendBatchHeader([]byte("hdr"), len(batch))
	for i := range batch {
		var r Result
		if got, r = AppendChecked(got, &batch[i]); r.Code != CodeOK {
			t.Fatalf("command %d refused: %s", i, r.Msg)
		}
	}
	if want := AppendBatch([]byte("hdr"), batch); !bytes.Equal(got, want) {
		t.Fatalf("batch appended command by command differs:\n%x\n%x", got, want)
	}
	bad := []Command{
		{Kind: CmdCreateService, State: TaskState(200), Spec: &ServiceSpec{Name: "x"}},
		// A hot kind carrying what only the round trip checks.
		{Kind: CmdAssign, Task: 9, Node: 4, Settings: &ClusterSettings{TaskHistoryLimit: 1 << 20}},
		{Kind: CmdTaskStatus, Task: 9, Node: 4, Entry: &OutboxEntry{Cmd: Command{Kind: CmdAssign, State: TaskState(200)}}},
	}
	for i := range bad {
		before := []byte("kept")
		buf, r := AppendChecked(before, &bad[i])
		if r.Code != CodeInvalid || string(buf) != "kept" || CheckEncodable(&bad[i]) != r {
			t.Fatalf("undecodable command %d: %v %q (buffer %q)", i, r.Code, r.Msg, buf)
		}
	}
}

// BenchmarkEncodeOnTheWayToRaft: what a service create costs the codec
// between its submission and its entry: checked and encoded into its
// batch ("twice": a round trip to check, then encoded again with the
// batch; "once": its fields checked and encoded into the batch).
func BenchmarkEncodeOnTheWayToRaft(b *testing.B) {
	cmds := encodeOnceBatch()[:1]
	buf := make([]byte, 0, 4096)
	b.Run("twice", func(b *testing.B) {
		for b.Loop() {
			if CheckEncodable(&cmds[0]).Code != CodeOK {
				b.Fatal("refused")
			}
			buf = AppendBatch(buf[:0], cmds)
		}
	})
	b.Run("once", func(b *testing.B) {
		for b.Loop() {
			var r Result
			if buf, r = AppendChecked(AppendBatchHeader(buf[:0], 1), &cmds[0]); r.Code != CodeOK {
				b.Fatal("refused")
			}
		}
	})
}

// roundTrips is the check AppendChecked made before: a command is
// encodable when its encoding decodes back.
func roundTrips(c *Command) bool {
	if c.Entry != nil && c.Entry.Cmd.Entry != nil {
		return false // encodeCommand refuses to write it
	}
	e := encoder{}
	encodeCommand(&e, c)
	d := newDecoder(e.b)
	d.specExt = true
	var back Command
	decodeCommand(&d, &back)
	return d.Err() == nil && d.Len() == 0
}

// The field check AppendChecked makes instead of a round trip refuses
// exactly the commands whose encoding would not decode, over random
// commands with every enumerated field in and out of range.
func TestUnencodableIsTheRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 1))
	enum := func(n int) uint8 { // mostly in range, sometimes just past it or far
		switch rng.IntN(8) {
		case 0:
			return uint8(n + rng.IntN(3))
		case 1:
			return uint8(128 + rng.IntN(128))
		}
		return uint8(rng.IntN(n))
	}
	update := func() UpdateConfig {
		return UpdateConfig{Parallelism: rng.Uint32(), FailureAction: FailureAction(enum(int(numFailureActions))),
			Order: UpdateOrder(enum(int(StartFirst) + 1)), MaxFailureRatio: rng.Float64()}
	}
	var gen func(depth int) Command
	gen = func(depth int) Command {
		c := Command{Kind: CmdKind(enum(int(numCmdKinds))), State: TaskState(enum(int(numTaskStates))),
			NodeStatus: NodeStatus(enum(int(numNodeStatuses))), Availability: Availability(enum(int(numAvailabilities))),
			ExitCode: rng.Int32(), Node: NodeID(rng.Uint32()), Task: TaskID(rng.Uint64()), Name: "n"}
		if rng.IntN(3) == 0 {
			c.Spec = &ServiceSpec{Name: "s", Mode: ServiceMode(enum(int(ModeGlobal) + 1)),
				Restart:    RestartPolicy{Condition: RestartCondition(enum(int(RestartNone) + 1))},
				Disconnect: DisconnectPolicy{Reconcile: ReconcileMode(enum(int(numReconcileModes)))},
				Placement:  PlacementPolicy{Strategy: PlacementStrategy(enum(int(numStrategies)))},
				Update:     update(), Rollback: update(), Labels: map[string]string{"a": "b"}, Constraints: []string{"x"}}
		}
		if rng.IntN(3) == 0 {
			c.NodeSpec = &Node{ID: NodeID(rng.Uint32()), Role: Role(enum(int(numRoles))),
				Availability: Availability(enum(int(numAvailabilities))), Status: NodeStatus(enum(int(numNodeStatuses)))}
		}
		if rng.IntN(4) == 0 {
			c.NetworkSpec = &Network{ID: 1, Name: "a", Subnet: "10.0.0.0/16"}
		}
		if rng.IntN(4) == 0 {
			c.Settings = &ClusterSettings{TaskHistoryLimit: []int{-1, 0, 5, 1 << 16, 1<<16 + 1}[rng.IntN(5)]}
		}
		if depth < 2 && rng.IntN(3) == 0 {
			c.Entry = &OutboxEntry{Seq: 1, Index: 2, Cmd: gen(depth + 1)}
		}
		return c
	}
	refused := 0
	for i := range 20_000 {
		c := gen(0)
		want := roundTrips(&c)
		buf, r := AppendChecked([]byte("h"), &c)
		if got := r.Code == CodeOK; got != want {
			t.Fatalf("command %d: field check says encodable %v (%q), round trip %v: %+v", i, got, r.Msg, want, c)
		}
		if !want {
			refused++
			continue
		}
		e := encoder{b: []byte("h")}
		encodeCommand(&e, &c)
		if !bytes.Equal(buf, e.b) {
			t.Fatalf("command %d: appended %x, encoding %x", i, buf, e.b)
		}
	}
	if refused < 1000 || refused > 19_000 {
		t.Fatalf("%d of 20,000 random commands refused: the generator misses a side", refused)
	}
}
