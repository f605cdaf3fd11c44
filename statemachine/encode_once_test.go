package statemachine

import (
	"bytes"
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

// A batch of commands encoded when they were checked is the batch
// AppendBatch writes; the hot kinds keep no encoding (they are encoded
// with their batch); a command the codec cannot carry is refused with
// what CheckEncodable says.
func TestEncodeCheckedIsTheBatchEncoding(t *testing.T) {
	batch := encodeOnceBatch()
	encs := make([][]byte, len(batch))
	for i := range batch {
		var r Result
		encs[i], r = EncodeChecked(&batch[i])
		if r.Code != CodeOK {
			t.Fatalf("command %d refused: %s", i, r.Msg)
		}
		hot := batch[i].Kind == CmdTaskStatus || batch[i].Kind == CmdAssign
		if hot != (encs[i] == nil) {
			t.Fatalf("command %d (%v): encoding kept %v", i, batch[i].Kind, encs[i] != nil)
		}
	}
	want := AppendBatch([]byte("hdr"), batch)
	if got := AppendBatchEncoded([]byte("hdr"), batch, encs); !bytes.Equal(got, want) {
		t.Fatalf("pre-encoded batch differs:\n%x\n%x", got, want)
	}
	bad := Command{Kind: CmdCreateService, State: TaskState(200), Spec: &ServiceSpec{Name: "x"}}
	enc, r := EncodeChecked(&bad)
	if r.Code != CodeInvalid || enc != nil || CheckEncodable(&bad) != r {
		t.Fatalf("an undecodable command: %v %q (kept %d bytes)", r.Code, r.Msg, len(enc))
	}
}

// BenchmarkEncodeOnTheWayToRaft: what a service create costs the codec
// between its submission and its entry: checked and encoded into its
// batch ("twice": a round trip to check, then encoded again with the
// batch; "once": the checked encoding copied into the batch).
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
		encs := make([][]byte, 1)
		for b.Loop() {
			var r Result
			if encs[0], r = EncodeChecked(&cmds[0]); r.Code != CodeOK {
				b.Fatal("refused")
			}
			buf = AppendBatchEncoded(buf[:0], cmds, encs)
		}
	})
}
