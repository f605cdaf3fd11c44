package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// metaFile records, in a data directory, what may never change about the
// replica living there.
const metaFile = "shoal-engine.json"

type meta struct {
	Version   int    `json:"version"`
	Groups    int    `json:"groups"`
	ReplicaID uint64 `json:"replica_id"`
	RaftAddr  string `json:"raft_addr"`
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

// resolveMeta fills cfg's Groups and RaftAddr from the data directory (or
// defaults, on first use), refuses changes to what is fixed, and records the
// result. cfg must have its defaults applied.
func resolveMeta(cfg *Config) error {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("engine: create data dir: %w", err)
	}
	m, ok, err := readMeta(cfg.DataDir)
	if err != nil {
		return err
	}
	if ok {
		switch {
		case cfg.Groups != 0 && cfg.Groups != m.Groups:
			return fmt.Errorf("%w: %s was created with %d service groups; the group count is fixed at cluster creation, so start with %d groups (or omit the setting) or use a fresh data directory",
				ErrDataDir, cfg.DataDir, m.Groups, m.Groups)
		case cfg.ReplicaID != m.ReplicaID:
			return fmt.Errorf("%w: %s belongs to replica %d, not %d", ErrDataDir, cfg.DataDir, m.ReplicaID, cfg.ReplicaID)
		case cfg.RaftAddr != "" && cfg.RaftAddr != m.RaftAddr:
			return fmt.Errorf("%w: %s was created for Raft address %s, not %s; peers know it by that address",
				ErrDataDir, cfg.DataDir, m.RaftAddr, cfg.RaftAddr)
		}
		cfg.Groups, cfg.RaftAddr = m.Groups, m.RaftAddr
		if a, ok := cfg.Peers[cfg.ReplicaID]; ok && a != cfg.RaftAddr {
			return fmt.Errorf("%w: peers give replica %d address %s but %s records %s", ErrDataDir, cfg.ReplicaID, a, cfg.DataDir, cfg.RaftAddr)
		}
		return nil
	}
	if cfg.Groups == 0 {
		cfg.Groups = DefaultGroups
	}
	if cfg.RaftAddr == "" {
		if a, ok := cfg.Peers[cfg.ReplicaID]; ok {
			cfg.RaftAddr = a
		} else if cfg.RaftAddr, err = freeLoopbackAddr(); err != nil {
			return err
		}
	}
	m = meta{Version: 1, Groups: cfg.Groups, ReplicaID: cfg.ReplicaID, RaftAddr: cfg.RaftAddr}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("engine: encode meta: %w", err)
	}
	tmp := filepath.Join(cfg.DataDir, metaFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("engine: write meta: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(cfg.DataDir, metaFile)); err != nil {
		return fmt.Errorf("engine: write meta: %w", err)
	}
	return nil
}

// freeLoopbackAddr returns a loopback address whose port was free a moment
// ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("engine: find a free loopback port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("engine: find a free loopback port: %w", err)
	}
	return addr, nil
}
