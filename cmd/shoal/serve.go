package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"shoal/engine"
	"shoal/statemachine"
)

type serveOptions struct {
	dataDir       string
	id            uint64
	raftAddr      string
	peers         string
	groups        int
	raftLogLevel  string
	statusFile    string
	createService string
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a manager: this replica of the cluster group and every service group",
		Long: `Run a manager replica until SIGINT or SIGTERM.

Alone (no --peers) it is a one-replica cluster. For three managers, start
each with its own --id, --raft-addr and --data-dir and the same --peers:

  shoal serve --id 1 --raft-addr 127.0.0.1:7101 --data-dir d1 \
      --peers 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103

On exit it prints one line: "shoal: stopped replica=ID g0=INDEX/HASH g1=...".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("groups") {
				o.groups = 0 // the data directory's count, or the default
			}
			return runServe(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "shoal-data", "directory for this replica's Raft log, snapshots and meta")
	f.Uint64Var(&o.id, "id", 1, "this replica's Raft ID (1 or more; fixed per data directory)")
	f.StringVar(&o.raftAddr, "raft-addr", "", "host:port for Raft traffic (default: the one recorded in --data-dir, else a free loopback port)")
	f.StringVar(&o.peers, "peers", "", "every initial replica as id=host:port,... including this one (default: this replica alone)")
	f.IntVar(&o.groups, "groups", engine.DefaultGroups, "number of service groups, fixed when the cluster is created")
	f.StringVar(&o.raftLogLevel, "raft-log-level", "error", "dragonboat log level: critical, error, warning, info or debug")
	f.StringVar(&o.statusFile, "status-file", "", "write this replica's group status (JSON) here every 250ms and on exit")
	f.StringVar(&o.createService, "create-service", "", "admin hook until the API lands: create service NAME[:REPLICAS] once the cluster is up")
	return cmd
}

// parsePeers parses "1=host:port,2=host:port".
func parsePeers(s string) (map[uint64]string, error) {
	if s == "" {
		return nil, nil
	}
	peers := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not id=host:port with id 1 or more", part)
		}
		if _, dup := peers[n]; dup {
			return nil, fmt.Errorf("--peers: replica %d listed twice", n)
		}
		peers[n] = addr
	}
	return peers, nil
}

func runServe(ctx context.Context, o serveOptions, out io.Writer) error {
	peers, err := parsePeers(o.peers)
	if err != nil {
		return err
	}
	e, err := engine.Open(engine.Config{
		DataDir:      o.dataDir,
		ReplicaID:    o.id,
		RaftAddr:     o.raftAddr,
		Peers:        peers,
		Groups:       o.groups,
		RaftLogLevel: o.raftLogLevel,
	})
	if err != nil {
		return err
	}
	defer e.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(out, "shoal: serving replica=%d raft=%s groups=%d data=%s\n", e.ReplicaID(), e.RaftAddr(), e.Groups(), o.dataDir)

	if o.createService != "" {
		go createServiceOnce(ctx, e, o.createService, out)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-tick.C:
		}
		if o.statusFile != "" {
			if err := writeStatus(e, o.statusFile); err != nil && !errors.Is(err, engine.ErrNotReady) {
				fmt.Fprintln(out, "shoal: status file:", err)
			}
		}
	}
	st, err := e.Status()
	if err != nil {
		return err
	}
	var line strings.Builder
	fmt.Fprintf(&line, "shoal: stopped replica=%d", e.ReplicaID())
	for _, g := range st {
		fmt.Fprintf(&line, " g%d=%d/%016x", g.Group, g.LastIndex, g.Hash)
	}
	fmt.Fprintln(out, line.String())
	return nil
}

// createServiceOnce submits one service create once every group has a
// leader, retrying what was not applied.
func createServiceOnce(ctx context.Context, e *engine.Engine, spec string, out io.Writer) {
	name, reps, _ := strings.Cut(spec, ":")
	replicas := uint64(1)
	if reps != "" {
		var err error
		if replicas, err = strconv.ParseUint(reps, 10, 32); err != nil {
			fmt.Fprintf(out, "shoal: --create-service %q: replicas must be a number\n", spec)
			return
		}
	}
	cmd := statemachine.Command{Kind: statemachine.CmdCreateService,
		Spec: &statemachine.ServiceSpec{Name: name, Replicas: uint32(replicas)}}
	for ctx.Err() == nil {
		if err := e.WaitReady(ctx); err != nil {
			return
		}
		_, err := e.Submit(ctx, cmd)
		if errors.Is(err, engine.ErrNotProposed) || errors.Is(err, engine.ErrTimeout) {
			continue // an unknown outcome shows up as ErrExists next time
		}
		if err != nil && !errors.Is(err, statemachine.ErrExists) {
			fmt.Fprintf(out, "shoal: create service %s: %v\n", name, err)
			return
		}
		fmt.Fprintf(out, "shoal: service %s exists in group %d\n", name, e.GroupOfService(name))
		return
	}
}

type statusDoc struct {
	Replica  uint64        `json:"replica"`
	RaftAddr string        `json:"raft_addr"`
	Leading  bool          `json:"leading"`
	Groups   []groupStatus `json:"groups"`
}

type groupStatus struct {
	engine.GroupStatus
	Hash string `json:"hash"` // hex: JSON numbers lose 64-bit precision elsewhere
}

// writeStatus replaces path atomically with this replica's status.
func writeStatus(e *engine.Engine, path string) error {
	st, err := e.Status()
	if err != nil {
		return err
	}
	doc := statusDoc{Replica: e.ReplicaID(), RaftAddr: e.RaftAddr(), Leading: e.Leading()}
	for _, g := range st {
		doc.Groups = append(doc.Groups, groupStatus{GroupStatus: g, Hash: fmt.Sprintf("%016x", g.Hash)})
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
