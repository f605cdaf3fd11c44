package statemachine

import "testing"

// A batch that fails to decode into a caller's (pooled) array leaves
// nothing of what it decoded there: the array keeps no pointer into the
// bad entry's commands.
func TestDecodeBatchIntoFailedLeavesTheArrayEmpty(t *testing.T) {
	good := []Command{{Kind: CmdTick}, {Kind: CmdCreateService, Spec: &ServiceSpec{Name: "web", Replicas: 2}}}
	b := AppendBatch(nil, good)
	buf := make([]Command, 0, 4)
	if _, err := DecodeBatchInto(buf, b[:len(b)-1]); err == nil {
		t.Fatal("a truncated batch decoded")
	}
	for i, c := range buf[:cap(buf)] {
		if c.Kind != 0 || c.Spec != nil {
			t.Fatalf("command %d of the array is %+v after a failed decode, want empty", i, c)
		}
	}
}
