package control

import (
	"sync"
	"testing"

	"shoal/statemachine"
)

// A session's requests share one record, however many arrive at once; a
// node keeps one record, its newest session's, however often it
// reconnects; another node's record under a session ID is replaced.
func TestSessionTableKeepsOneRecordPerNode(t *testing.T) {
	var tab sessionTable
	first := tab.open(1, 5)
	if tab.get(1, 5) != first {
		t.Fatal("a session's second request got another record")
	}
	got := make([]*session, 50)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = tab.get(99, 6) // opened at another manager
		}()
	}
	wg.Wait()
	for _, ss := range got {
		if ss != got[0] {
			t.Fatal("concurrent requests of one session got different records")
		}
	}
	for sid := uint64(100); sid < 200; sid++ { // node 5 reconnects a hundred times
		tab.open(sid, 5)
	}
	records := 0
	tab.byID.Range(func(_, _ any) bool { records++; return true })
	if records != 2 || tab.size() != 2 {
		t.Fatalf("%d records (%d nodes) after two nodes' sessions, want 2", records, tab.size())
	}
	if ss := tab.get(199, 7); ss.node != statemachine.NodeID(7) {
		t.Fatalf("session 199 asked for node 7 got node %d's record", ss.node)
	}
}
