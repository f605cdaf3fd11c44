package engine

import (
	"bytes"
	"fmt"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"shoal/statemachine"
)

// applyOnWrite applies entries through the replica, as dragonboat's apply
// loop does, at the first write of a snapshot being saved: SaveSnapshot
// runs beside Update.
type applyOnWrite struct {
	bytes.Buffer
	apply func()
}

func (w *applyOnWrite) Write(p []byte) (int, error) {
	if w.apply != nil {
		w.apply()
		w.apply = nil
	}
	return w.Buffer.Write(p)
}

// A snapshot is the state at PrepareSnapshot: entries applied while it is
// saved (every service removed, so every task changed, then reaped) do not
// show in it, and its bytes are those of the whole canonical encoding
// captured at the prepare.
func TestSnapshotSavedWhileApplying(t *testing.T) {
	r := newReplica(2, 8, nil)
	r.mu.st.Apply(mustDecode(t, encodeEntry(entryStamp{now: 42}, createServices("svc", 20, 2500), 0)), 7, 42, &r.mu.out)
	canon := r.mu.st.Canonical()
	if len(canon) < 3<<19 {
		t.Fatalf("the state encodes to %d bytes: too few to be saved in several parts", len(canon))
	}
	var want bytes.Buffer
	if err := statemachine.SaveCanonical(&want, canon); err != nil {
		t.Fatal(err)
	}
	before := r.mu.st.Hash()
	ctx, err := r.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	w := &applyOnWrite{apply: func() {
		var remove []statemachine.Command
		for i := range 20 {
			remove = append(remove, statemachine.Command{Kind: statemachine.CmdRemoveService, Name: fmt.Sprintf("svc-%d", i)})
		}
		ents := []sm.Entry{
			{Index: 8, Cmd: encodeEntry(entryStamp{now: 43}, remove, 0)},
			{Index: 9, Cmd: encodeEntry(entryStamp{now: 100e9}, []statemachine.Command{{Kind: statemachine.CmdTick}}, 0)},
		}
		if _, err := r.Update(ents); err != nil {
			t.Error(err)
		}
	}}
	if err := r.SaveSnapshot(ctx, w, nil, nil); err != nil {
		t.Fatal(err)
	}
	if w.apply != nil {
		t.Fatal("nothing was written")
	}
	if r.mu.st.Hash() == before || r.mu.st.LastIndex() != 9 {
		t.Fatal("the entries applied during the save changed nothing")
	}
	if !bytes.Equal(w.Bytes(), want.Bytes()) {
		t.Fatalf("the snapshot saved (%d bytes) is not the state at the prepare (%d bytes)", w.Len(), want.Len())
	}
	r2 := newReplica(2, 8, nil)
	if err := r2.RecoverFromSnapshot(bytes.NewReader(w.Bytes()), nil, nil); err != nil {
		t.Fatal(err)
	}
	if r2.mu.st.Hash() != before || r2.mu.st.LastIndex() != 7 {
		t.Fatal("the snapshot does not restore the state at the prepare")
	}
}

// The same while the save runs on a goroutine of its own beside Update
// and reads, as dragonboat runs them (run it with -race).
func TestSnapshotSavedBesideUpdates(t *testing.T) {
	r := newReplica(2, 8, nil)
	r.mu.st.Apply(mustDecode(t, encodeEntry(entryStamp{now: 42}, createServices("svc", 20, 2500), 0)), 7, 42, &r.mu.out)
	var want bytes.Buffer
	if err := statemachine.SaveCanonical(&want, r.mu.st.Canonical()); err != nil {
		t.Fatal(err)
	}
	ctx, err := r.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	done := make(chan error)
	go func() { done <- r.SaveSnapshot(ctx, &got, nil, nil) }()
	for i := range 20 {
		cmd := statemachine.Command{Kind: statemachine.CmdRemoveService, Name: fmt.Sprintf("svc-%d", i)}
		if _, err := r.Update([]sm.Entry{{Index: uint64(8 + i), Cmd: encodeEntry(entryStamp{now: 43 + int64(i)}, []statemachine.Command{cmd}, 0)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Lookup(readFunc(func(st *statemachine.State) { _ = st.NumTasks() })); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("the snapshot saved (%d bytes) is not the state at the prepare (%d bytes)", got.Len(), want.Len())
	}
}
