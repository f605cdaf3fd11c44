package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"shoal/statemachine"
)

// OnOpen comes before anything a group applies or recovers, with the
// group count read from the data directory on a restart: a follower of
// the groups set up there (the manager's feed) misses nothing, also what
// a restarted replica recovers from its snapshot while Open returns.
func TestOnOpenComesBeforeEveryApplyAndRecover(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var calls []string
	note := func(s string) {
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
	}
	open := func(groups int) *Engine {
		cfg := testConfig(groups)
		cfg.DataDir = dir // the Raft address is chosen at the first start and kept
		cfg.OnOpen = func(g int) { note(fmt.Sprintf("open %d", g)) }
		cfg.OnApply = func(g int, index uint64, _ []statemachine.Effect) { note("apply") }
		cfg.OnRecover = func(g int, index uint64) { note(fmt.Sprintf("recover %d at %d", g, index)) }
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open(2)
	waitReady(t, e)

	// More entries than SnapshotEntries (64): the restart recovers from a
	// snapshot.
	for i := range 300 {
		submitAll(t, e, createServices(fmt.Sprintf("s%d-", i), 1, 1)) // an entry each
	}
	e.Close()
	mu.Lock()
	calls = nil
	mu.Unlock()

	e = open(0) // the count comes from the data directory
	defer e.Close()
	waitReady(t, e)

	eventually(t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range calls {
			if len(c) > 7 && c[:7] == "recover" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("a snapshot recovered on restart (calls so far: %d)", len(calls))
	})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) == 0 || calls[0] != "open 2" {
		t.Fatalf("the hooks were called in the order %q, want \"open 2\" first", calls[:min(len(calls), 5)])
	}
	for _, c := range calls[1:] {
		if c[:4] == "open" {
			t.Fatalf("OnOpen called more than once: %q", calls)
		}
	}
}

func waitReady(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}
