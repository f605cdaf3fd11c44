package engine

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/logger"

	"shoal/internal/clock"
	"shoal/statemachine"
)

// Config configures one replica (one manager process's share of the
// cluster). Zero values take the defaults named on each field.
type Config struct {
	// DataDir holds this replica's Raft log, snapshots and the engine's
	// meta file (group count, replica ID, Raft address). Required.
	DataDir string
	// ReplicaID is this replica's Raft ID, 1 or more. Default 1. It is
	// stored in DataDir and may not change later.
	ReplicaID uint64
	// RaftAddr is the host:port this replica listens on for Raft traffic.
	// Default: the address stored in DataDir, else a free loopback port
	// chosen at first start. Dragonboat refuses a data directory whose
	// recorded address differs.
	RaftAddr string
	// Peers maps every initial replica ID to its Raft address, this
	// replica's included. Default: this replica alone (a one-replica
	// cluster). It must be the same on every start.
	Peers map[uint64]string
	// Join starts a replica that a running cluster added to the membership
	// of every group (Engine.AddReplica, done by the manager answering
	// `serve --join`): its groups start with no initial members and learn
	// them, and the state, from their leaders. Recorded in DataDir on the
	// first start, so later starts need not repeat it; it cannot be
	// combined with Peers.
	Join bool
	// Groups is the number of service groups (the cluster group comes on
	// top). Default: the number stored in DataDir, else DefaultGroups. It is
	// fixed when DataDir is first used; a different value later is refused.
	Groups int

	// RTT is the expected round trip between replicas; every Raft timer
	// is a multiple of it (dragonboat's RTTMillisecond). Default 20ms.
	RTT time.Duration
	// HeartbeatRTT is the leader's heartbeat interval, in RTTs. Default 2
	// (40ms).
	HeartbeatRTT uint64
	// ElectionRTT is the election timeout, in RTTs; at least 10 times
	// HeartbeatRTT, and longer than the worst apply cycle, or leaders churn
	// under big batches. Dragonboat draws each timeout in [1, 2) times it.
	// Default 25 (500ms at the default RTT: with check-quorum and pre-vote
	// on, a dead leader is replaced in about 0.7-1s on a loaded 2-core
	// machine; see make perf-failover).
	ElectionRTT uint64
	// SnapshotEntries is how many applied entries of a group trigger an
	// automatic snapshot, after which the log is compacted. Default 4096:
	// a snapshot encodes the whole group under its lock (applies wait), and
	// at a million tasks every 1,024 entries took 13-19 % of each replica's
	// CPU during a ramp; the price is a longer log to replay when a replica
	// restarts (entries are at most MaxBatchBytes, typically a few KiB).
	SnapshotEntries uint64
	// CompactionOverhead is how many entries stay in the log behind a
	// snapshot, so a briefly lagging replica catches up without a snapshot
	// transfer. Default 256.
	CompactionOverhead uint64
	// MaxInMemLogSize is the most bytes of log a group keeps in memory
	// before dragonboat answers ErrSystemBusy (the proposer then backs off
	// and retries). Default 64 MiB.
	MaxInMemLogSize uint64

	// MaxBatchRecords is the most commands the proposer puts in one Raft
	// entry. Default 4096.
	MaxBatchRecords int
	// MaxBatchBytes is the most bytes of encoded commands the proposer
	// puts in one Raft entry (the entry's header aside; these limits all
	// count commands' encodings). Default 256 KiB.
	MaxBatchBytes int
	// MaxInFlightBytes bounds, per group, the bytes proposed but not yet
	// applied on this replica; the proposer waits while it is reached (one
	// entry may overshoot it). Default 1 MiB.
	MaxInFlightBytes int
	// MaxInFlightEntries bounds, per group, the entries proposed but not
	// yet applied on this replica. While it is reached, submissions queue
	// up and the next entry takes them all (group commit). Default 8.
	MaxInFlightEntries int
	// MaxQueuedBytes bounds, per group, the bytes submitted but not yet
	// proposed; submitters block while it is reached. Default 8 MiB.
	MaxQueuedBytes int
	// ProposeTimeout is how long an entry may take, retries included, from
	// its first proposal to being applied on this replica before its
	// submitters get ErrTimeout. Also the default deadline of Read.
	// Default 10s.
	ProposeTimeout time.Duration
	// ClockBound bounds the difference between any two replicas' clocks.
	// An entry carries the time after which it must not apply: the
	// earliest deadline of its submitters and its ProposeTimeout, plus
	// ClockBound, compared with the group's replicated time (see
	// statemachine.State.ApplyEntry). Default 3s.
	ClockBound time.Duration
	// TimeBeat is how long a group's leader lets the group go without an
	// entry it proposed before it proposes a time entry (CmdTick), so that
	// entries' deadlines meet a moving time in an idle group too. Default:
	// the election timeout. Negative: never (tests that compare a group's
	// whole state across a pause).
	TimeBeat time.Duration

	// LogDBShards is the number of LogDB (pebble) shards, each with its own
	// write-ahead log. Fixed when DataDir is first used. Default 2.
	LogDBShards uint64
	// Workers is the number of dragonboat exec, commit, apply, snapshot and
	// close workers each. Default 2.
	Workers uint64

	// RaftCAFile, RaftCertFile and RaftKeyFile, when all set, make Raft
	// traffic mutual TLS (dragonboat's MutualTLS): every peer must present
	// a certificate chaining to the CA in RaftCAFile, and this replica
	// presents the chain in RaftCertFile (its leaf must name this replica's
	// Raft host). PEM files; read at start and at each new connection.
	// Default: plain TCP.
	RaftCAFile, RaftCertFile, RaftKeyFile string

	// Clock stamps entries and times back-off. Default: the wall clock.
	Clock clock.Clock
	// RaftLogLevel is the level of dragonboat's own logs: "critical",
	// "error", "warning", "info" or "debug". Default "error" (quiet; at
	// "error" the transport's failures to reach a peer, a line per second
	// per peer while one is down, are left out too). It is process-wide:
	// engines sharing a process should use the same level.
	RaftLogLevel string
	// Logf receives the engine's own rare notices (a data directory that
	// never started is reset). Default: discard.
	Logf func(format string, args ...any)
	// OnOpen, if set (default: none), is called once by Open with the
	// number of service groups (from Groups or, on a restart, from the
	// data directory), before any group starts: no OnApply or OnRecover
	// comes before it, so what is set up there to follow the groups
	// misses nothing a replica applies. (Open returns before the groups
	// have recovered their state: a follower set up after it missed what
	// they recovered meanwhile, and could not always read how far that
	// went.)
	OnOpen func(groups int)
	// OnApply, if set (default: none), is called on this replica after each
	// applied entry that has effects, on dragonboat's apply goroutine and
	// under the group's write lock: it must be quick, must not block and
	// must not call the engine. The effects slice is reused after it
	// returns.
	OnApply func(group int, index uint64, effects []statemachine.Effect)
	// OnRecover, if set (default: none), is called on this replica after a
	// group's state was replaced by a snapshot applied up to index (at
	// start, or when a lagging replica catches up by snapshot): the
	// entries up to index were never passed to OnApply. Same rules as
	// OnApply.
	OnRecover func(group int, index uint64)
	// OnDiverge, if set, turns on the replay check (default: off): each
	// group keeps a second state restored from its last snapshot, applies
	// every entry to it as well, and at the next snapshot compares the two
	// encodings byte for byte. A difference means applying is not
	// deterministic (a restarted replica would disagree with the others);
	// each entry's results and effects are compared too. OnDiverge then
	// gets where (detail) and both encodings. It doubles the cost of applying:
	// for tests and load-test debugging, not production.
	OnDiverge func(group int, index uint64, detail string, live, restored []byte)
}

// DefaultGroups is the number of service groups a new cluster gets.
const DefaultGroups = 8

// MaxGroups bounds the number of service groups: a group number is the top
// 16 bits of a TaskID.
const MaxGroups = 1<<16 - 1

// The default Raft timing: a 20ms RTT, a leader heartbeat every 2 RTTs and
// an election timeout of 500ms (25 RTTs).
const (
	DefaultRTT             = 20 * time.Millisecond
	DefaultHeartbeatRTT    = 2
	DefaultElectionTimeout = 500 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.ReplicaID == 0 {
		c.ReplicaID = 1
	}
	setDefault(&c.RTT, DefaultRTT)
	setDefault(&c.HeartbeatRTT, DefaultHeartbeatRTT)
	setDefault(&c.ElectionRTT, uint64(DefaultElectionTimeout/DefaultRTT))
	setDefault(&c.SnapshotEntries, 4096)
	setDefault(&c.CompactionOverhead, 256)
	setDefault(&c.MaxInMemLogSize, 64<<20)
	setDefault(&c.MaxBatchRecords, 4096)
	setDefault(&c.MaxBatchBytes, 256<<10)
	setDefault(&c.MaxInFlightBytes, 1<<20)
	setDefault(&c.MaxInFlightEntries, 8)
	setDefault(&c.MaxQueuedBytes, 8<<20)
	setDefault(&c.ProposeTimeout, 10*time.Second)
	setDefault(&c.ClockBound, 3*time.Second)
	setDefault(&c.LogDBShards, 2)
	setDefault(&c.Workers, 2)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.RaftLogLevel == "" {
		c.RaftLogLevel = "error"
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func (c Config) validate() error {
	switch {
	case c.DataDir == "":
		return fmt.Errorf("%w: DataDir is required", ErrConfig)
	case c.Groups < 0 || c.Groups > MaxGroups:
		return fmt.Errorf("%w: %d service groups; use 1..%d", ErrConfig, c.Groups, MaxGroups)
	case c.RTT < time.Millisecond:
		return fmt.Errorf("%w: RTT %s is below 1ms", ErrConfig, c.RTT)
	case c.ElectionRTT < 10*c.HeartbeatRTT:
		return fmt.Errorf("%w: ElectionRTT %d must be at least 10x HeartbeatRTT %d", ErrConfig, c.ElectionRTT, c.HeartbeatRTT)
	case c.ProposeTimeout < 4*c.RTT:
		return fmt.Errorf("%w: ProposeTimeout %s must be at least 4 RTTs", ErrConfig, c.ProposeTimeout)
	case c.MaxBatchRecords < 1 || c.MaxBatchBytes < 1 || c.MaxInFlightBytes < 1 || c.MaxInFlightEntries < 1 || c.MaxQueuedBytes < 1:
		return fmt.Errorf("%w: batch and in-flight limits must be positive", ErrConfig)
	}
	if _, err := parseLogLevel(c.RaftLogLevel); err != nil {
		return err
	}
	if n := btoi(c.RaftCAFile != "") + btoi(c.RaftCertFile != "") + btoi(c.RaftKeyFile != ""); n != 0 && n != 3 {
		return fmt.Errorf("%w: Raft TLS needs a CA, a certificate and a key file", ErrConfig)
	}
	if c.RaftAddr != "" {
		if err := checkAddr("Raft address", c.RaftAddr); err != nil {
			return err
		}
	}
	for id, addr := range c.Peers {
		if id == 0 {
			return fmt.Errorf("%w: peer ID 0; replica IDs start at 1", ErrConfig)
		}
		if err := checkAddr(fmt.Sprintf("replica %d's peer address", id), addr); err != nil {
			return err
		}
	}
	if len(c.Peers) > 0 {
		addr, ok := c.Peers[c.ReplicaID]
		if !ok {
			return fmt.Errorf("%w: peers %v do not include this replica (%d)", ErrConfig, c.Peers, c.ReplicaID)
		}
		if c.RaftAddr != "" && addr != c.RaftAddr {
			return fmt.Errorf("%w: peers give replica %d address %s but its Raft address is %s", ErrConfig, c.ReplicaID, addr, c.RaftAddr)
		}
	}
	return nil
}

// dragonboatLoggers are the logger names dragonboat and its LogDB use.
var dragonboatLoggers = []string{"config", "dragonboat", "gossip", "grpc", "logdb", "pebblekv",
	"raft", "raftpb", "registry", "rsm", "server", "settings", "tan", "tools", "transport"}

func parseLogLevel(s string) (logger.LogLevel, error) {
	switch strings.ToLower(s) {
	case "critical":
		return logger.CRITICAL, nil
	case "error":
		return logger.ERROR, nil
	case "warning", "warn":
		return logger.WARNING, nil
	case "info":
		return logger.INFO, nil
	case "debug":
		return logger.DEBUG, nil
	}
	return 0, fmt.Errorf("%w: raft log level %q; use critical, error, warning, info or debug", ErrConfig, s)
}

// logLevel is the dragonboat log level set in this process.
var logLevel struct {
	sync.Mutex
	set   bool
	level logger.LogLevel
}

// setLogLevel sets every dragonboat logger's level. The level is
// process-wide and dragonboat's loggers read it without synchronization, so
// it is only written when it changes: engines sharing a process should ask
// for the same level.
func setLogLevel(level string) {
	l, err := parseLogLevel(level)
	if err != nil {
		l = logger.ERROR
	}
	logLevel.Lock()
	defer logLevel.Unlock()
	if logLevel.set && logLevel.level == l {
		return
	}
	logLevel.set, logLevel.level = true, l
	for _, name := range dragonboatLoggers {
		if name == "transport" && l == logger.ERROR {
			// A peer that is down is an error line per second per peer;
			// the manager says once which peers it waits for instead.
			logger.GetLogger(name).SetLevel(logger.CRITICAL)
			continue
		}
		logger.GetLogger(name).SetLevel(l)
	}
}
