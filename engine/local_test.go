package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"shoal/internal/freeport"
)

// Local runs several replicas of one cluster in this process, each with its
// own data directory under one root and its own loopback port (chosen at
// first start and kept in the data directories, so a Local reopened on the
// same root is the same cluster). For the engine's tests and benchmarks.
// Its methods are not safe for concurrent use.
type Local struct {
	root    string
	base    Config
	peers   map[uint64]string
	engines []*Engine // index: replica ID - 1; nil while stopped
}

// StartLocal starts (or restarts, if root holds one already) a cluster of
// n replicas in this process. base supplies everything but DataDir,
// ReplicaID, RaftAddr and Peers.
func StartLocal(root string, n int, base Config) (*Local, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: a local cluster needs at least one replica, not %d", ErrConfig, n)
	}
	l := &Local{root: root, base: base, peers: make(map[uint64]string, n), engines: make([]*Engine, n)}
	for id := uint64(1); id <= uint64(n); id++ {
		m, ok, err := readMeta(l.dir(id))
		switch {
		case err != nil:
			return nil, err
		case ok:
			l.peers[id] = m.RaftAddr
		default:
			if l.peers[id], err = freeport.Addr(); err != nil {
				return nil, err
			}
		}
	}
	for id := uint64(1); id <= uint64(n); id++ {
		if err := l.Restart(id); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *Local) dir(id uint64) string {
	return filepath.Join(l.root, "replica-"+strconv.FormatUint(id, 10))
}

// Engine returns replica id's engine (1-based), nil while it is stopped.
func (l *Local) Engine(id uint64) *Engine { return l.engines[id-1] }

// Engines returns the running engines.
func (l *Local) Engines() []*Engine {
	var out []*Engine
	for _, e := range l.engines {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// Stop closes replica id's engine; its data stays.
func (l *Local) Stop(id uint64) {
	if e := l.engines[id-1]; e != nil {
		e.Close()
		l.engines[id-1] = nil
	}
}

// Restart starts replica id again from its data directory (a no-op if it
// runs).
func (l *Local) Restart(id uint64) error {
	if l.engines[id-1] != nil {
		return nil
	}
	cfg := l.base
	cfg.DataDir, cfg.ReplicaID, cfg.RaftAddr, cfg.Peers = l.dir(id), id, l.peers[id], l.peers
	e, err := Open(cfg)
	if err != nil {
		return fmt.Errorf("engine: local replica %d: %w", id, err)
	}
	l.engines[id-1] = e
	return nil
}

// WaitReady waits until every running replica knows a leader for every
// group.
func (l *Local) WaitReady(ctx context.Context) error {
	var errs []error
	for _, e := range l.Engines() {
		errs = append(errs, e.WaitReady(ctx))
	}
	return errors.Join(errs...)
}

// Close stops every replica.
func (l *Local) Close() {
	for id := range l.engines {
		l.Stop(uint64(id + 1))
	}
}
