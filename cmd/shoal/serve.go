package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"shoal/api"
	"shoal/engine"
	"shoal/engine/monitor"
	"shoal/internal/clock"
	"shoal/manager"
	"shoal/security"
)

type serveOptions struct {
	dataDir      string
	id           uint64
	raftAddr     string
	peers        string
	groups       int
	raftLogLevel string
	// electionTimeout is the Raft election timeout (a multiple of the RTT).
	electionTimeout time.Duration
	statusFile      string
	apiAddr         string
	pprof           bool
	syncInterval    time.Duration
	minHeartbeat    time.Duration
	massExpiryShare float64
	massExpiryHold  time.Duration
	failoverGrace   time.Duration
	orphanTimeout   time.Duration
	maxAPIConns     int
	maxHandshakes   int
	dev             bool
	checkReplay     bool
	snapshotEntries uint64
	clockOffset     time.Duration
	insecure        bool
	join            string // API addresses of running managers (TLS join)
	token           string // the manager join token
	tokenFlag       bool   // --token was given (not only SHOAL_JOIN_TOKEN)
	nodeCertTTL     time.Duration
	memoryLimit     string
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a manager: this replica of the cluster group and every service group, and its API",
		Long: `Run a manager replica and its HTTP API until SIGINT or SIGTERM.

Alone (no --peers, no --join) it is a one-replica cluster. TLS is on by
default: that first replica creates the cluster CA in DATA-DIR/tls (with an
admin credential for the CLI: ca.crt, admin.crt, admin.key). Every other
replica joins the running cluster with --join and the manager token: the
manager answering adds it to the Raft membership of every group and hands
it its certificate, and it starts with no --peers:

  shoal serve --id 1 --raft-addr 127.0.0.1:7101 --api-addr 127.0.0.1:7701 --data-dir d1
  shoal serve --id 2 --raft-addr 127.0.0.1:7102 --api-addr 127.0.0.1:7702 --data-dir d2 \
      --join 127.0.0.1:7701 --token SHOAL-1-...

A restart needs only --data-dir (and --id): the rest is recorded there.
To replace a replica whose data is lost: ` + "`shoal replica rm ID`" + `, then
join a fresh one with a new --id.

Alternatively every initial replica starts with the same --peers list
(id=raft-addr,...); with TLS, replicas other than the lowest ID still pass
--join and --token to get their certificate.

--insecure runs without TLS (every replica then needs it); --insecure
--join ADDR adds the replica to the membership without a token.

With --dev it also runs an agent in the same process, so services run
processes on this machine at once (data in a fresh temporary directory,
removed when it stops, unless --data-dir is given); --dev is plain HTTP on
loopback.

On exit it prints one line: "shoal: stopped replica=ID g0=INDEX/HASH g1=...".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("groups") {
				o.groups = 0 // the data directory's count, or the default
			} else if o.groups < 1 {
				return fmt.Errorf("--groups must be 1 or more (got %d)", o.groups)
			}
			if cmd.Flags().Changed("id") && o.id == 0 {
				return errors.New("--id must be 1 or more")
			}
			o.tokenFlag = cmd.Flags().Changed("token")
			if !o.tokenFlag {
				o.token = os.Getenv("SHOAL_JOIN_TOKEN")
			}
			if !cmd.Flags().Changed("failover-grace") {
				o.failoverGrace = min(o.failoverGrace, o.orphanTimeout) // a short --orphan-timeout alone is enough
			}
			if o.dev && !cmd.Flags().Changed("data-dir") {
				dir, err := os.MkdirTemp("", "shoal-dev-")
				if err != nil {
					return err
				}
				o.dataDir = dir
				// A throwaway cluster: its directory goes with it (the
				// manager and the agent have stopped when runServe returns).
				defer func() {
					if err := os.RemoveAll(dir); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "shoal: removing the dev data directory: %v\n", err)
						return
					}
					fmt.Fprintf(cmd.OutOrStdout(), "shoal: removed the dev data directory %s (pass --data-dir to keep one)\n", dir)
				}()
			}
			return runServe(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "shoal-data", "directory for this replica's Raft log, snapshots and meta")
	f.Uint64Var(&o.id, "id", 1, "this replica's Raft ID (1 or more; fixed per data directory)")
	f.StringVar(&o.raftAddr, "raft-addr", "", "host:port for Raft traffic (default: the one recorded in --data-dir, else a free loopback port)")
	f.StringVar(&o.peers, "peers", "", "every initial replica as id=host:port,... including this one (default: those recorded in --data-dir, else this replica alone)")
	f.IntVar(&o.groups, "groups", engine.DefaultGroups, "number of service groups, fixed when the cluster is created (a replica joining with --join needs the cluster's count)")
	f.StringVar(&o.raftLogLevel, "raft-log-level", "error", "dragonboat log level: critical, error, warning, info or debug")
	f.DurationVar(&o.electionTimeout, "election-timeout", engine.DefaultElectionTimeout, "how long a follower waits without hearing its leader before it campaigns (Raft; at least 400ms, in steps of 20ms; every replica of a cluster should use the same). A killed replica's groups are taken over at once whatever it is; it bounds a host that vanishes. Raise it where managers share busy CPUs, or leaders change under load")
	f.StringVar(&o.statusFile, "status-file", "", "write this replica's group status (JSON) here every 250ms and on exit")
	f.StringVar(&o.apiAddr, "api-addr", defaultAddr, "host:port the HTTP API (users and agents) listens on")
	f.BoolVar(&o.pprof, "pprof", false, "serve /debug/pprof/ on the API address")
	f.DurationVar(&o.syncInterval, "sync-interval", time.Minute, "how often agents sync what they hold (pushed to agents; ±50% jitter)")
	f.DurationVar(&o.minHeartbeat, "min-heartbeat", time.Second, "shortest heartbeat period handed to agents (it grows with the node count, up to 30s)")
	f.Float64Var(&o.massExpiryShare, "mass-expiry-share", monitor.DefaultMassExpiryShare, "share of the nodes (at least 10) whose heartbeats may expire within one expiry window before the leader holds the expiring ones in their status instead of marking them disconnected or down (an overloaded or cut-off leader is likelier than that many nodes failing together); 0 turns the hold off")
	f.DurationVar(&o.massExpiryHold, "mass-expiry-hold", monitor.DefaultMassExpiryHold, "longest such hold; nodes still silent after it expire as usual")
	f.DurationVar(&o.failoverGrace, "failover-grace", monitor.DefaultFailoverGrace, "how long after this replica becomes the leader it marks no node down and orphans none, so every agent finds the new leader first (0 up to --orphan-timeout, which it defaults to if shorter; give every replica the same)")
	f.DurationVar(&o.orphanTimeout, "orphan-timeout", monitor.DefaultOrphanTimeout, "how long a node stays down before the leader orphans it: its unfinished tasks become orphaned and the addresses it held in quarantine are freed for other tasks (at least 3 × --min-heartbeat; give every replica the same)")
	f.IntVar(&o.maxAPIConns, "max-api-conns", 0, "most API connections (agents and users) open at once; one more is closed at once, so its client retries elsewhere or later (default: the open-file limit less an eighth, kept for Raft and the log store)")
	f.IntVar(&o.maxHandshakes, "max-handshakes", api.DefaultHandshakes, "most TLS handshakes on the API under way at once; more connections wait their turn, each connection's turn and its client's hello bounded by 10s, the handshake after the hello by 20s more (a fleet reconnecting at once after a leader change queues here)")
	f.BoolVar(&o.dev, "dev", false, "development mode: also run an agent in this process (plain HTTP on loopback)")
	f.BoolVar(&o.checkReplay, "check-replay", false, "debugging: keep a copy of each group restored from its last snapshot, apply every entry to it too and compare at the next snapshot, and check the task model's invariants there (doubles apply cost); a difference or a broken invariant is logged and both states written to the data directory")
	_ = f.MarkHidden("check-replay")
	f.Uint64Var(&o.snapshotEntries, "snapshot-entries", 0, "testing: how many applied entries of a group trigger a snapshot (0: the engine's default, 4096)")
	_ = f.MarkHidden("snapshot-entries")
	f.DurationVar(&o.clockOffset, "clock-offset", 0, "testing: move this replica's clock (the time it stamps entries and its timers read) by this much, to check the cluster's bound on clock error between replicas")
	_ = f.MarkHidden("clock-offset")
	f.BoolVar(&o.insecure, "insecure", false, "no TLS: plain HTTP API and Raft, no authentication (every replica and agent of the cluster needs it)")
	f.StringVar(&o.join, "join", "", "API address(es) of a running manager, comma-separated: join its cluster (without --peers: become a member of every group; with TLS: obtain this replica's certificate, needs --token)")
	// No default from the environment: --help would print the secret.
	f.StringVar(&o.token, "token", "", "the manager join token, SHOAL-1-... (env SHOAL_JOIN_TOKEN; print it with \"shoal token manager\")")
	f.StringVar(&o.memoryLimit, "memory-limit", "auto", "soft memory limit of this replica's Go heap: a size (4GiB), a share of the machine's memory (75%), none, or auto: GOMEMLIMIT's when it is set, else 90% of the container's memory limit when it runs in one that has a limit, else none. Near the limit the replica collects garbage more often instead of growing; it is not a hard cap")
	f.DurationVar(&o.nodeCertTTL, "node-cert-ttl", security.DefaultWorkerLifetime, "lifetime of the certificates this manager issues to agents (they renew at 50-80%)")
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
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: replica %d's address %q is not host:port", n, addr)
		}
		if _, dup := peers[n]; dup {
			return nil, fmt.Errorf("--peers: replica %d listed twice", n)
		}
		peers[n] = addr
	}
	return peers, nil
}

func runServe(ctx context.Context, o serveOptions, out io.Writer) error {
	// The replica's notices carry the time, as Raft's own lines do.
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, "%s "+format+"\n", append([]any{time.Now().Format("2006-01-02 15:04:05.000000")}, args...)...)
	}
	peers, err := parsePeers(o.peers)
	if err != nil {
		return err
	}
	for _, a := range []struct{ flag, addr, example string }{
		{"--raft-addr", o.raftAddr, "127.0.0.1:7101"}, {"--api-addr", o.apiAddr, defaultAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); a.addr != "" && err != nil {
			return fmt.Errorf("%s %q is not host:port (e.g. %s)", a.flag, a.addr, a.example)
		}
	}
	rtt, err := electionRTT(o.electionTimeout)
	if err != nil {
		return err
	}
	share, err := massExpiry(o.massExpiryShare, o.massExpiryHold)
	if err != nil {
		return err
	}
	grace, err := monitorTimers(o.failoverGrace, o.orphanTimeout, o.minHeartbeat)
	if err != nil {
		return err
	}
	if o.maxAPIConns < 0 {
		return fmt.Errorf("--max-api-conns %d must be 1 or more (or 0 for the default)", o.maxAPIConns)
	}
	if o.maxHandshakes < 1 {
		return fmt.Errorf("--max-handshakes %d must be 1 or more", o.maxHandshakes)
	}
	ml, err := resolveMemLimit(o.memoryLimit, "/")
	if err != nil {
		return err
	}
	joinAddrs := splitAddrs(o.join)
	if o.join != "" && len(joinAddrs) == 0 {
		return fmt.Errorf("--join %q names no address: give the API address of a running manager", o.join)
	}
	ml.apply()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	so := manager.ServeOptions{Options: manager.Options{DataDir: o.dataDir, ReplicaID: o.id, RaftAddr: o.raftAddr, Peers: peers,
		Groups: o.groups, RaftLogLevel: o.raftLogLevel, APIAddr: o.apiAddr, Pprof: o.pprof,
		SyncInterval: o.syncInterval, MinHeartbeat: o.minHeartbeat, MassExpiryShare: share, MassExpiryHold: o.massExpiryHold,
		FailoverGrace: grace, OrphanTimeout: o.orphanTimeout, MaxAPIConns: o.maxAPIConns, MaxHandshakes: o.maxHandshakes, Logf: logf},
		Insecure: o.insecure, Dev: o.dev, JoinAddrs: joinAddrs, Token: o.token, TokenGiven: o.tokenFlag,
		WorkerLifetime: o.nodeCertTTL, StatusFile: o.statusFile,
		Say: func(line string) {
			fmt.Fprintln(out, "shoal: "+line)
			if strings.HasPrefix(line, "serving replica=") { // once the replica serves: a refusal stays one line
				fmt.Fprintln(out, "shoal: "+ml.String())
			}
		}}
	so.Engine.ElectionRTT = rtt
	so.Engine.SnapshotEntries = o.snapshotEntries
	if o.clockOffset != 0 {
		so.Engine.Clock = clock.Offset{D: o.clockOffset}
	}
	if o.checkReplay {
		so.Engine.OnDiverge = replayDiverged(o.dataDir, logf)
	}
	if o.dev {
		// The embedded agent starts once the manager takes writes, so its
		// first session succeeds at once.
		so.Ready = func(ctx context.Context, m *manager.Manager) (func(), error) {
			return startDevAgent(ctx, o, m.APIAddr, out)
		}
	}
	return serveError(manager.Serve(ctx, so))
}

// serveError drops the engine's own name from a configuration or data
// directory refusal: the rest of the line says what is wrong in the
// flags' terms.
func serveError(err error) error {
	switch {
	case errors.Is(err, engine.ErrConfig): // "engine: bad configuration: " adds nothing
		return errors.New(strings.Replace(err.Error(), engine.ErrConfig.Error()+": ", "", 1))
	case errors.Is(err, engine.ErrDataDir): // "data directory does not match ..." stays
		return errors.New(strings.Replace(err.Error(), engine.ErrDataDir.Error(), strings.TrimPrefix(engine.ErrDataDir.Error(), "engine: "), 1))
	}
	return err
}

// electionRTT turns --election-timeout into Raft ticks of the default RTT.
func electionRTT(d time.Duration) (uint64, error) {
	least := time.Duration(10*engine.DefaultHeartbeatRTT) * engine.DefaultRTT
	if d < least {
		return 0, fmt.Errorf("--election-timeout %s is too short: it must be at least %s (ten leader heartbeats of %s)",
			d, least, time.Duration(engine.DefaultHeartbeatRTT)*engine.DefaultRTT)
	}
	return uint64((d + engine.DefaultRTT - 1) / engine.DefaultRTT), nil
}

// massExpiry checks --mass-expiry-share and --mass-expiry-hold and returns
// the monitor's share (negative: the hold is off).
func massExpiry(share float64, hold time.Duration) (float64, error) {
	switch {
	case share < 0 || share > 1 || share != share:
		return 0, fmt.Errorf("--mass-expiry-share %g is not a share of the nodes: give 0 (no hold) to 1", share)
	case hold <= 0:
		return 0, fmt.Errorf("--mass-expiry-hold %s must be positive; to turn the hold off, give --mass-expiry-share 0", hold)
	case share == 0:
		return -1, nil
	}
	return share, nil
}

// monitorTimers checks --failover-grace and --orphan-timeout against each
// other and --min-heartbeat, and returns the failover grace the monitor
// takes (negative: none).
func monitorTimers(grace, orphan, minHeartbeat time.Duration) (time.Duration, error) {
	if minHeartbeat <= 0 {
		minHeartbeat = time.Second // the manager's default
	}
	down := monitor.Config{GraceFactor: monitor.DefaultGraceFactor, MinTTL: minHeartbeat}.DownTTL()
	switch {
	case orphan < down:
		return 0, fmt.Errorf("--orphan-timeout %s is shorter than the %s a silent node takes to go down (%d heartbeats of --min-heartbeat %s): give at least %s",
			orphan, down, monitor.DefaultGraceFactor, minHeartbeat, down)
	case grace < 0 || grace > orphan:
		return 0, fmt.Errorf("--failover-grace %s is out of range: give 0 (none) up to --orphan-timeout (%s)", grace, orphan)
	case grace == 0:
		return -1, nil
	}
	return grace, nil
}
