package engine

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shoal/internal/freeport"
)

// Bad addresses and a Raft port in use are refused before the data
// directory is created.
func TestOpenChecksBeforeWriting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		raft  string
		peers map[uint64]string
		want  string
	}{
		"port in use":      {raft: busy.Addr().String(), want: "cannot listen"},
		"port not numeric": {raft: "127.0.0.1:71o1", want: "port number"},
		"no port":          {raft: "127.0.0.1", want: "not host:port"},
		"own entry differs": {raft: free, peers: map[uint64]string{1: "127.0.0.1:1", 2: free},
			want: "peers give replica 1 address"},
		"peer typo":     {raft: free, peers: map[uint64]string{1: free, 2: "127.0.0.1:7l02"}, want: "replica 2's peer address"},
		"not in peers":  {raft: free, peers: map[uint64]string{2: free}, want: "do not include this replica"},
		"host not here": {raft: "192.0.2.1:7101", want: "cannot listen"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(1)
			cfg.DataDir = filepath.Join(t.TempDir(), "d")
			cfg.RaftAddr, cfg.Peers = c.raft, c.peers
			e, err := Open(cfg)
			if err == nil {
				e.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrConfig saying %q", err, c.want)
			}
			if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("data directory written: %v", err)
			}
		})
	}
}

// A directory whose replica never started (its meta still pending) is
// reset by the next start, whatever it was first given; the peers are
// recorded, so a restart needs none, and different ones are refused.
func TestPendingDirectoryIsResetAndPeersRecorded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.MkdirAll(filepath.Join(dir, raftDir), 0o755); err != nil {
		t.Fatal(err)
	}
	typo := meta{Version: 1, Groups: 3, ReplicaID: 1, RaftAddr: "127.0.0.1:1", Pending: true,
		Peers: map[uint64]string{1: "127.0.0.1:1"}}
	if err := writeMeta(dir, typo); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, raftDir, "junk"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(1)
	cfg.DataDir, cfg.RaftAddr = dir, addr
	cfg.Peers = map[uint64]string{1: addr}
	var notes []string
	cfg.Logf = func(f string, args ...any) { notes = append(notes, f) }
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if len(notes) != 1 || !strings.Contains(notes[0], "never started") {
		t.Fatalf("notes %q", notes)
	}
	m, ok, err := readMeta(dir)
	if err != nil || !ok || m.Pending || m.Groups != 1 || m.RaftAddr != addr || m.Peers[1] != addr {
		t.Fatalf("meta after the start: %+v (ok %t, err %v)", m, ok, err)
	}
	if _, err := os.Stat(filepath.Join(dir, raftDir, "junk")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the pending raft directory was kept")
	}

	// Restart with no peers and no address: both come from the directory.
	cfg.RaftAddr, cfg.Peers = "", nil
	e, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.RaftAddr() != addr || e.Peers()[1] != addr || len(e.Peers()) != 1 {
		t.Fatalf("restart: addr %s peers %v", e.RaftAddr(), e.Peers())
	}
	e.Close()

	cfg.Peers = map[uint64]string{1: addr, 2: "127.0.0.1:2"}
	if e, err := Open(cfg); !errors.Is(err, ErrDataDir) || !strings.Contains(err.Error(), "omit them") {
		if e != nil {
			e.Close()
		}
		t.Fatalf("other peers: %v", err)
	}
}
