package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeServe writes a "shoal" that prints line and exits 1, as serve does
// when it cannot listen.
func fakeServe(t *testing.T, line string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shoal")
	script := "#!/bin/sh\necho '" + line + "'\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// A start whose replica found its port taken (chosen free, bound by
// another process before the replica bound it) is made again on other
// ports, up to startAttempts times, each failed attempt's directory and
// log kept aside; a start that failed otherwise is not repeated.
func TestStartAgainWhenAPortWasTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	taken := "shoal: engine: bad configuration: cannot listen on Raft address 127.0.0.1:40901: listen tcp 127.0.0.1:40901: bind: address already in use"
	dir := t.TempDir()
	_, err := Start(ctx, Config{Binary: fakeServe(t, taken), Managers: 3, DataDir: dir, ReadyTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "exited before it created the cluster CA") || !strings.Contains(err.Error(), "it ends: "+taken) {
		t.Fatalf("start: %v, want replica 1's exit, quoting its log", err)
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "m1.log.attempt*"))
	if len(kept) == 0 || len(kept) != startAttempts-1 {
		t.Errorf("failed attempts' logs kept aside: %v; want %d (the start was not made again)", kept, startAttempts-1)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "m1.log")); err != nil || !strings.Contains(string(b), "address already in use") {
		t.Errorf("the last attempt's log: %q, %v", b, err)
	}

	other := t.TempDir()
	if _, err := Start(ctx, Config{Binary: fakeServe(t, "shoal: --groups must be 1 or more"), Managers: 3, DataDir: other, ReadyTimeout: 10 * time.Second}); err == nil {
		t.Fatal("a replica that cannot start at all: no error")
	}
	if matches, _ := filepath.Glob(filepath.Join(other, "*.attempt*")); len(matches) != 0 {
		t.Fatalf("a start that failed for another reason was made again: %v", matches)
	}
}

// A data directory that already holds a replica's data (an earlier run's)
// is refused before any replica starts, and left as it was: a replica
// started on it would exit at once, its peers knowing it by another
// address.
func TestStartRefusesAnEarlierRunsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	old := filepath.Join(dir, "m2", "raft")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(ctx, Config{Binary: fakeServe(t, "started"), Managers: 3, DataDir: dir, ReadyTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), dir+" already holds an earlier cluster's replica data (m2)") {
		t.Fatalf("start on an earlier run's data: %v, want it refused naming the directory", err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("the earlier data: %v", err)
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "m*.log")); len(logs) != 0 {
		t.Errorf("replicas were started anyway: %v", logs)
	}
	// An empty directory of a replica's name is no earlier run's data.
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "m1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := freshDataDir(empty, 3); err != nil {
		t.Errorf("an empty m1: %v", err)
	}
}
