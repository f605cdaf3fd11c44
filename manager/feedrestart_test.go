package manager

import (
	"fmt"
	"testing"

	"shoal/engine"
	"shoal/statemachine"
)

// A restarted replica's feed never answers from a cursor before the
// snapshot the replica recovered as if it knew every change since: it
// either refuses the cursor (the reader resyncs) or lists the changes
// made before the snapshot too. (The feed was made after Open, which
// returns before the groups recover: the recovery's floor was lost and a
// group whose state could not be read yet counted as known from index 0,
// so an agent's poll from before the snapshot got an INCREMENTAL without
// the changes up to it, and a task whose desired state changed there was
// never started.)
func TestRestartedFeedNeverSkipsWhatItsSnapshotHolds(t *testing.T) {
	dir := t.TempDir()
	o := Options{DataDir: dir, ReplicaID: 1, Groups: 1, RaftLogLevel: "critical", APIAddr: "127.0.0.1:0",
		Engine: engine.Config{SnapshotEntries: 16, CompactionOverhead: 4}}
	m, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := m.E.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.Feed.Applied()
	create := func(name string) {
		t.Helper()
		spec := statemachine.ServiceSpec{Name: name, Replicas: 1}
		if _, err := m.E.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &spec}); err != nil {
			t.Fatal(err)
		}
	}
	create("watched") // a change after the cursor
	var watched statemachine.ServiceID
	if err := m.E.ReadLocal(1, func(st *statemachine.State) { watched = st.ServiceByName("watched").ID }); err != nil {
		t.Fatal(err)
	}
	for i := range 60 { // past SnapshotEntries: the restart recovers a snapshot holding it
		create(fmt.Sprintf("filler-%d", i))
	}
	m.Close()

	o.Groups = 0 // from the data directory
	m, err = Start(o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.E.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	events, _, ok := m.Feed.Since(before, 1<<20)
	if !ok {
		return // the cursor is refused: its reader starts afresh
	}
	for _, c := range events {
		if c.Group == 1 && c.Service == watched {
			return
		}
	}
	t.Fatalf("the restarted replica's feed answers from %v with %d changes, none of them the service created after that cursor (before its snapshot): a reader there skips it", before, len(events))
}
