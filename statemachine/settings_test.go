package statemachine

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// failSlot fails the pending or assigned task of the service's slot 1 on
// node 1, times times, through apply (restart any, no delay: each failure
// leaves a new pending task in the slot).
func failSlot(t *testing.T, s *State, apply func(...Command) []Result, name string, times int) {
	t.Helper()
	for range times {
		var id TaskID
		for _, tid := range s.TaskIDs() {
			if tk := s.Task(tid); tk.Status.State == StatePending && s.Service(tk.Service).Spec.Name == name {
				id = tid
			}
		}
		if id == 0 {
			t.Fatalf("service %s has no pending task to fail", name)
		}
		for _, c := range []Command{{Kind: CmdAssign, Task: id, Node: 1},
			{Kind: CmdTaskStatus, Task: id, Node: 1, State: StateFailed, ExitCode: 1}} {
			if r := apply(c)[0]; r.Err() != nil {
				t.Fatalf("%s: %v", c.Kind, r.Err())
			}
		}
	}
}

// slotLen returns how many tasks slot 1 of the named service holds.
func slotLen(s *State, name string) int {
	_, tasks := s.SlotTasks(s.ServiceByName(name).ID)
	return len(tasks[0])
}

// The task history limit is a cluster setting: the cluster group validates
// and applies it, its outbox carries it to every service group (also from
// a snapshot taken before delivery), each group trims its slots to a lower
// limit at once, and every group's snapshot keeps the value.
func TestClusterSettingsReachEveryGroup(t *testing.T) {
	w := newLeaseWorld()
	deliver := func() { w.redrive(func(s step) { w.apply(s.g, s.batch...) }) }
	w.apply(0, Command{Kind: CmdUpsertNode, NodeSpec: &Node{ID: 1, Name: "n1", CPU: 4000, Memory: 1 << 30}})
	deliver()
	for g, name := range map[int]string{1: "web", 2: "db"} {
		apply := func(cs ...Command) []Result { return w.apply(g, cs...) }
		if r := apply(Command{Kind: CmdCreateService, Spec: &ServiceSpec{Name: name, Replicas: 1}})[0]; r.Err() != nil {
			t.Fatal(r.Err())
		}
		failSlot(t, w.st[g], apply, name, 6)
		if n := slotLen(w.st[g], name); n != DefaultHistoryRetention {
			t.Fatalf("group %d: slot keeps %d tasks before any setting, want the default %d", g, n, DefaultHistoryRetention)
		}
	}

	set := func(g, limit int) Result {
		return w.apply(g, Command{Kind: CmdSetClusterSettings, Settings: &ClusterSettings{TaskHistoryLimit: limit}})[0]
	}
	if r := set(1, 2); !errors.Is(r.Err(), ErrInvalid) || !strings.Contains(r.Msg, "cluster group") {
		t.Fatalf("setting in a service group: %v, want it refused and sent to the cluster group", r.Err())
	}
	next := w.st[0].OutboxNext()
	for _, bad := range []int{0, -1, MaxTaskHistoryLimit + 1} {
		r := set(0, bad)
		if !errors.Is(r.Err(), ErrInvalid) || !strings.Contains(r.Msg, "task history limit") {
			t.Errorf("limit %d: %v, want a refusal naming the task history limit", bad, r.Err())
		}
	}
	if r := w.apply(0, Command{Kind: CmdSetClusterSettings})[0]; !errors.Is(r.Err(), ErrInvalid) {
		t.Errorf("no settings: %v, want refused", r.Err())
	}
	if got := w.st[0].Settings().TaskHistoryLimit; got != DefaultHistoryRetention || w.st[0].OutboxNext() != next {
		t.Fatalf("refused settings changed the limit to %d or the outbox (next %d, was %d)", got, w.st[0].OutboxNext(), next)
	}

	if r := set(0, 2); r.Err() != nil {
		t.Fatal(r.Err())
	}
	if got := w.st[0].Settings().TaskHistoryLimit; got != 2 || w.st[0].OutboxNext() != next+1 {
		t.Fatalf("cluster group: limit %d and next outbox entry %d, want 2 and %d", got, w.st[0].OutboxNext(), next+1)
	}
	// A cluster group restarted from a snapshot before delivering still
	// carries the change.
	w.st[0] = saveLoad(t, w.st[0])
	for g := 1; g <= 2; g++ {
		if got := w.st[g].Settings().TaskHistoryLimit; got != DefaultHistoryRetention {
			t.Fatalf("group %d has limit %d before delivery", g, got)
		}
	}
	deliver()
	for g, name := range map[int]string{1: "web", 2: "db"} {
		if got := w.st[g].Settings().TaskHistoryLimit; got != 2 {
			t.Errorf("group %d: limit %d after delivery, want 2", g, got)
		}
		if n := slotLen(w.st[g], name); n != 2 {
			t.Errorf("group %d: slot keeps %d tasks after the limit went to 2", g, n)
		}
		if err := w.st[g].CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		l := saveLoad(t, w.st[g])
		if l.Settings().TaskHistoryLimit != 2 || l.Hash() != w.st[g].Hash() || w.st[g].Clone().Settings() != w.st[g].Settings() {
			t.Errorf("group %d: the limit did not survive a snapshot or a clone", g)
		}
		failSlot(t, w.st[g], func(cs ...Command) []Result { return w.apply(g, cs...) }, name, 3)
		if n := slotLen(w.st[g], name); n != 2 {
			t.Errorf("group %d: slot keeps %d tasks after more failures, want 2", g, n)
		}
	}
	if got := saveLoad(t, w.st[0]).Settings().TaskHistoryLimit; got != 2 {
		t.Errorf("cluster group's snapshot has limit %d, want 2", got)
	}
}

// Batches and snapshots written before the cluster settings existed (by
// the code of 6d46d32) still decode: the batch re-encodes to the same
// bytes, and the snapshot's slot retention becomes its task history limit.
func TestOldFormatsDecodeWithSettings(t *testing.T) {
	oldBatch := "010304000000000000000000000201026e3106776f726b657200c03e8080808008000000000e00000000000000000000" +
		"0401036e65740b31302e302e302e302f3234001700000000000000000000080100000001010206000300000100000000" +
		"0000"
	// Group 1 with node 1 and service web, whose slot 1 failed six times
	// under the default retention: five tasks kept.
	oldSnapshot := "53484f414c534d05010005000e80a683c707070200020000000101026e3106776f726b657200c03e8080808008000080" +
		"b1d0ba070e00010103776562000100000000000000000000000000000000000000000000000000010002000000000000" +
		"0101010680ccbebd0780deb2bf0780f0a6c10780829bc30780948fc50780a683c707058380808080804001010101020a" +
		"020080f0a6c1070580deb2bf070000010180deb2bf070100020180e7acc0070200030180f0a6c1070a00040180f0a6c1" +
		"070a01010200000001008480808080804001010101020a020080829bc3070580f0a6c1070000010180f0a6c107010002" +
		"0180f9a0c2070200030180829bc3070a00040180829bc3070a01010200000001008580808080804001010101020a0200" +
		"80948fc5070580829bc3070000010180829bc30701000201808b95c4070200030180948fc5070a00040180948fc5070a" +
		"01010200000001008680808080804001010101020a020080a683c7070580948fc5070000010180948fc5070100020180" +
		"9d89c6070200030180a683c7070a00040180a683c7070a010102000000010087808080808040010101000101000080a6" +
		"83c7070280a683c7070000010180a683c707010002010000000000010002000002000000000000000000"
	raw, _ := hex.DecodeString(oldBatch)
	batch, err := DecodeBatch(raw)
	if err != nil {
		t.Fatalf("old batch: %v", err)
	}
	if len(batch) != 3 || batch[0].Kind != CmdUpsertNode || batch[2].Entry == nil || batch[2].Entry.Cmd.NodeStatus != NodeDown {
		t.Fatalf("old batch decoded to %+v", batch)
	}
	for _, c := range batch {
		if c.Settings != nil {
			t.Fatalf("old %s command decoded with settings", c.Kind)
		}
	}
	// It holds no service spec, so only the version byte moves on.
	if again := AppendBatch(nil, batch); again[0] != batchVersion || !bytes.Equal(again[1:], raw[1:]) {
		t.Fatal("an old batch re-encodes differently")
	}

	raw, _ = hex.DecodeString(oldSnapshot)
	s, err := FromCanonical(raw)
	if err != nil {
		t.Fatalf("old snapshot: %v", err)
	}
	if got := s.Settings().TaskHistoryLimit; got != DefaultHistoryRetention || slotLen(s, "web") != 5 {
		t.Fatalf("old snapshot: limit %d, slot of %d tasks; want %d and 5", got, slotLen(s, "web"), DefaultHistoryRetention)
	}
	var out Output
	s.Apply([]Command{{Kind: CmdDeliver, Group: 1, Entry: &OutboxEntry{Seq: 1, Index: 20,
		Cmd: Command{Kind: CmdSetClusterSettings, Settings: &ClusterSettings{TaskHistoryLimit: 3}}}}}, s.LastIndex()+1, s.LastTime()+1, &out)
	if r := out.Results[0]; r.Err() != nil || r.Msg != "" {
		t.Fatalf("delivering the settings to the old state: %v %q", r.Err(), r.Msg)
	}
	if s.Settings().TaskHistoryLimit != 3 || slotLen(s, "web") != 3 {
		t.Fatalf("after the setting: limit %d, slot of %d tasks; want 3 and 3", s.Settings().TaskHistoryLimit, slotLen(s, "web"))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
