package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"shoal/engine"
)

// ServeOptions configure a replica's whole life as `shoal serve` runs it:
// the replica (Options) and what happens around it. Its errors name serve's
// flags, the words the user gave these options in.
type ServeOptions struct {
	// Options is the replica. Serve fills in Join (whether this start adds
	// the replica to a running cluster's membership) and TLS.
	Options
	// Insecure: no TLS (--insecure). Dev: the one-replica development mode
	// (--dev): plain HTTP on loopback, no TLS.
	Insecure, Dev bool
	// JoinAddrs are the API addresses of running managers (--join): with
	// TLS they hand this replica its certificate, and without Peers on a
	// data directory that never started they add it to every group.
	JoinAddrs []string
	// Token is the manager join token (--token or SHOAL_JOIN_TOKEN);
	// TokenGiven says it was given as --token.
	Token      string
	TokenGiven bool
	// WorkerLifetime is the lifetime of the agents' certificates this
	// manager issues (--node-cert-ttl).
	WorkerLifetime time.Duration
	// StatusFile, if set, is replaced with this replica's group status
	// (StatusDoc as JSON) every 250ms and on exit (--status-file).
	StatusFile string
	// Say receives each progress line for the user (serving, ready,
	// waiting for a quorum, joined, stopped...), without a prefix.
	// Default: discard.
	Say func(line string)
	// Ready, if set, runs once every group has a leader and the replica is
	// registered; Serve waits for it, and calls what it returns at stop,
	// before handing leadership over. If ctx ends before the replica is
	// ready, Serve returns ctx's error.
	Ready func(ctx context.Context, m *Manager) (stop func(), err error)
}

// Serve runs one replica until ctx ends: it prepares its TLS material
// (read from DATA-DIR/tls, created there by the cluster's first replica, or
// obtained from a running manager with the join token), joins a running
// cluster if asked, starts the replica, waits for a leader in every group
// and registers the replica's API address, and at stop hands the groups it
// leads to a caught-up peer and says the last index and hash of each group.
// Bad options and busy ports are refused before anything is written.
func Serve(ctx context.Context, o ServeOptions) error {
	say := o.Say
	if say == nil {
		say = func(string) {}
	}
	sayf := func(format string, args ...any) { say(fmt.Sprintf(format, args...)) }
	member, err := joinsMembership(o)
	if err != nil {
		return err
	}
	sec, err := prepareTLS(ctx, o, member, sayf)
	if err != nil {
		return err
	}
	if member && sec == nil {
		if err := joinInsecure(ctx, o, sayf); err != nil {
			return err
		}
	}
	mo := o.Options
	mo.Join, mo.TLS = member, sec
	m, err := Start(mo)
	if err != nil {
		return err
	}
	defer m.Close()
	e := m.E
	scheme, mode := "http", "TLS off (--insecure): anyone who reaches the API and Raft ports can act as any node or admin"
	switch {
	case sec != nil:
		scheme, mode = "https", "TLS on: mutual TLS for the API and Raft"
	case o.Dev:
		mode = "dev mode: plain HTTP on loopback, no TLS"
	}
	sayf("serving replica=%d raft=%s api=%s groups=%d data=%s", e.ReplicaID(), e.RaftAddr(), m.APIAddr, e.Groups(), o.DataDir)
	say(mode)
	ready := make(chan bool, 1)
	go func() {
		ok := waitQuorum(ctx, e, say) == nil && m.Register(ctx) == nil
		if ok {
			sayf("ready: every group has a leader; API at %s://%s", scheme, m.APIAddr)
		}
		ready <- ok
	}()
	if o.Ready != nil {
		if !<-ready {
			return ctx.Err()
		}
		stop, err := o.Ready(ctx, m)
		if err != nil {
			return err
		}
		defer stop()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-tick.C:
		}
		if o.StatusFile != "" {
			if err := writeStatus(e, o.StatusFile); err != nil && !errors.Is(err, engine.ErrNotReady) {
				say("status file: " + err.Error())
			}
		}
	}
	// A planned stop: hand the groups this replica leads to a caught-up
	// peer first, so the cluster does not wait out an election timeout.
	hctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	if err := e.HandOver(hctx); err != nil {
		say("leadership not handed over, the peers will elect a leader: " + err.Error())
	}
	cancel()
	st, err := e.Status()
	if err != nil {
		return err
	}
	var line strings.Builder
	fmt.Fprintf(&line, "stopped replica=%d", e.ReplicaID())
	for _, g := range st {
		fmt.Fprintf(&line, " g%d=%d/%016x", g.Group, g.LastIndex, g.Hash)
	}
	say(line.String())
	return nil
}

// StatusDoc is a replica's status file (ServeOptions.StatusFile).
type StatusDoc struct {
	Replica  uint64        `json:"replica"`
	RaftAddr string        `json:"raft_addr"`
	Leading  bool          `json:"leading"`
	Groups   []GroupStatus `json:"groups"`
}

// GroupStatus is one group's line of a StatusDoc.
type GroupStatus struct {
	engine.GroupStatus
	Hash string `json:"hash"` // hex: JSON numbers lose 64-bit precision elsewhere
}

// writeStatus replaces path atomically with this replica's status.
func writeStatus(e *engine.Engine, path string) error {
	st, err := e.Status()
	if err != nil {
		return err
	}
	doc := StatusDoc{Replica: e.ReplicaID(), RaftAddr: e.RaftAddr(), Leading: e.Leading()}
	for _, g := range st {
		doc.Groups = append(doc.Groups, GroupStatus{GroupStatus: g, Hash: fmt.Sprintf("%016x", g.Hash)})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
