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
		for b.Loop() {
			var r Result
			if buf, r = AppendChecked(AppendBatchHeader(buf[:0], 1), &cmds[0]); r.Code != CodeOK {
				b.Fatal("refused")
			}
		}
	})
}
