package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"shoal/internal/freeport"
)

// metaFile records, in a data directory, what may never change about the
// replica living there.
const metaFile = "shoal-engine.json"

// raftDir is dragonboat's own directory inside a data directory.
const raftDir = "raft"

type meta struct {
	Version   int    `json:"version"`
	Groups    int    `json:"groups"`
	ReplicaID uint64 `json:"replica_id"`
	RaftAddr  string `json:"raft_addr"`
	// Peers are the initial replicas, this one included, so a restart
	// needs no --peers. Absent in directories made before it was kept.
	Peers map[uint64]string `json:"peers,omitempty"`
	// Joined is true for a replica added to a running cluster (Config.Join):
	// its groups start with no initial members, on every start. Peers then
	// holds this replica alone.
	Joined bool `json:"joined,omitempty"`
	// Pending is true from the moment the directory is first written
	// until every group of the replica started in it. A pending directory
	// never started: it holds nothing of value, and the next Open resets it
	// and starts afresh with the configuration it is given.
	Pending bool `json:"pending,omitempty"`
}

// readMeta returns the data directory's meta, or ok=false if it has none.
func readMeta(dir string) (m meta, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return meta{}, false, nil
	}
	if err != nil {
		return meta{}, false, fmt.Errorf("engine: read meta: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, false, fmt.Errorf("%w: %s is not valid JSON: %w", ErrDataDir, filepath.Join(dir, metaFile), err)
	}
	return m, true, nil
}

// writeMeta replaces the data directory's meta atomically.
func writeMeta(dir string, m meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("engine: encode meta: %w", err)
	}
	tmp := filepath.Join(dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("engine: write meta: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, metaFile)); err != nil {
		return fmt.Errorf("engine: write meta: %w", err)
	}
	return nil
}

// resolveMeta fills cfg's Groups, RaftAddr and Peers from the data
// directory (or defaults, on first use) and refuses changes to what is
// fixed. It writes nothing: fresh reports that the directory has no
// started replica (none yet, or a pending one, which the caller resets).
// cfg must have its defaults applied.
func resolveMeta(cfg *Config) (m meta, fresh bool, err error) {
	m, ok, err := readMeta(cfg.DataDir)
	if err != nil {
		return meta{}, false, err
	}
	if ok && !m.Pending {
		switch {
		case cfg.Groups != 0 && cfg.Groups != m.Groups:
			return m, false, fmt.Errorf("%w: %s was created with %d service groups; the group count is fixed at cluster creation, so start with %d groups (or omit the setting) or use a fresh data directory",
				ErrDataDir, cfg.DataDir, m.Groups, m.Groups)
		case cfg.ReplicaID != m.ReplicaID:
			return m, false, fmt.Errorf("%w: %s belongs to replica %d, not %d", ErrDataDir, cfg.DataDir, m.ReplicaID, cfg.ReplicaID)
		case cfg.RaftAddr != "" && cfg.RaftAddr != m.RaftAddr:
			return m, false, fmt.Errorf("%w: %s was created for Raft address %s, not %s; peers know it by that address",
				ErrDataDir, cfg.DataDir, m.RaftAddr, cfg.RaftAddr)
		case cfg.Join && !m.Joined:
			return m, false, fmt.Errorf("%w: %s belongs to an initial member of its cluster, not to a replica that joined one; start it without --join", ErrDataDir, cfg.DataDir)
		case m.Joined && len(cfg.Peers) > 1:
			return m, false, fmt.Errorf("%w: %s belongs to a replica that joined a running cluster; its members are recorded by Raft, so start it without --peers", ErrDataDir, cfg.DataDir)
		case len(cfg.Peers) > 0 && len(m.Peers) > 0 && !maps.Equal(cfg.Peers, m.Peers):
			return m, false, fmt.Errorf("%w: %s was created with peers %s, not %s; the initial peers are fixed, so omit them (they are recorded) or give the same; if the recorded ones hold a typo and no replica was ever ready with them, stop every replica started with them, remove their data directories and start again",
				ErrDataDir, cfg.DataDir, FormatPeers(m.Peers), FormatPeers(cfg.Peers))
		}
		cfg.Groups, cfg.RaftAddr, cfg.Join = m.Groups, m.RaftAddr, m.Joined
		if len(cfg.Peers) == 0 {
			cfg.Peers = maps.Clone(m.Peers)
		}
		if a, ok := cfg.Peers[cfg.ReplicaID]; ok && a != cfg.RaftAddr {
			return m, false, fmt.Errorf("%w: peers give replica %d address %s but %s records %s", ErrDataDir, cfg.ReplicaID, a, cfg.DataDir, cfg.RaftAddr)
		}
		return m, false, nil
	}
	if cfg.Groups == 0 {
		cfg.Groups = DefaultGroups
	}
	if cfg.RaftAddr == "" {
		if a, ok := cfg.Peers[cfg.ReplicaID]; ok {
			cfg.RaftAddr = a
		} else if cfg.RaftAddr, err = freeport.Addr(); err != nil {
			return m, true, err
		}
	}
	if cfg.Join && len(cfg.Peers) > 1 {
		return m, true, fmt.Errorf("%w: a replica that joins a running cluster takes its members from it: give no peers", ErrConfig)
	}
	if len(cfg.Peers) == 0 {
		cfg.Peers = map[uint64]string{cfg.ReplicaID: cfg.RaftAddr}
	}
	return m, true, nil
}

// resetPending removes what a replica that never started left in dir: its
// meta and dragonboat's directory. Nothing else in dir is touched.
func resetPending(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, raftDir)); err != nil {
		return fmt.Errorf("engine: reset %s, which never started: %w", dir, err)
	}
	if err := os.Remove(filepath.Join(dir, metaFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("engine: reset %s, which never started: %w", dir, err)
	}
	return nil
}

// checkAddr reports whether addr is host:port with a host and a port
// number in 1..65535.
func checkAddr(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not host:port: %w", ErrConfig, what, addr, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || host == "" {
		return fmt.Errorf("%w: %s %q needs a host and a port number in 1..65535", ErrConfig, what, addr)
	}
	return nil
}

// checkBind reports whether this process can listen on addr (the Raft
// port must be free and local before anything is written).
func checkBind(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: cannot listen on Raft address %s: %w", ErrConfig, addr, err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("engine: Raft address %s: %w", addr, err)
	}
	return nil
}

// FormatPeers renders peers as "1=host:port,2=host:port" in ID order, the
// form --peers takes.
func FormatPeers(peers map[uint64]string) string {
	var b []byte
	for i, id := range slices.Sorted(maps.Keys(peers)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, id, 10)
		b = append(b, '=')
		b = append(b, peers[id]...)
	}
	return string(b)
}

// Check reports what Open would refuse in cfg (settings, addresses, the
// data directory's recorded settings, a Raft port that cannot be bound)
// without writing anything, so a caller can refuse bad input before it
// prepares files of its own.
func Check(cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	if _, _, err := resolveMeta(&cfg); err != nil {
		return err
	}
	if err := checkAddr("Raft address", cfg.RaftAddr); err != nil {
		return err
	}
	return checkBind(cfg.RaftAddr)
}

// Started reports whether dir holds a replica that started at least once
// (its meta is written and no longer pending).
func Started(dir string) (bool, error) {
	m, ok, err := readMeta(dir)
	return ok && !m.Pending, err
}
