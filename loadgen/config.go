package loadgen

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"shoal/agent"
	"shoal/loadgen/fleet"
)

// Phase names, in the order they run.
var AllPhases = []string{"ramp", "churn", "faults", "quiesce"}

// Config is one run's parameters. Zero values take the defaults named.
type Config struct {
	Binary   string   // the shoal binary for `serve` children; default os.Executable()
	Agents   int      // simulated agents; default 100
	Tasks    int      // tasks at quiescence; default 1,000
	Services int      // default 20
	Managers int      // manager child processes; default 3 (ignored with Join)
	Join     []string // drive these managers instead of starting any
	// Insecure: the managers speak plain HTTP (started with --insecure).
	// By default the started managers use TLS as in production, and with
	// Join the loadgen needs TLSDir.
	Insecure bool
	TLSDir   string // with Join and TLS: the admin credential (a manager's DATA-DIR/tls)
	Groups   int    // --groups of the children; 0: the server's default
	DataDir  string // children's data and logs; default a temporary directory (removed after a clean run)
	Seed     uint64 // default 1

	SyncInterval time.Duration // children's --sync-interval; default 5s
	MinHeartbeat time.Duration // children's --min-heartbeat; 0: the server's default (1s)
	// OrphanTimeout is the managers' --orphan-timeout (given to the
	// started ones; with Join, say what the managers were given): a node
	// down that long has its tasks orphaned and their addresses freed,
	// while the processes of an agent that is only cut off or vanished
	// would still run. The faults then cut off or vanish an agent for at
	// most half as long. 0: the server's default (24h; no bound needed).
	OrphanTimeout time.Duration
	RaftLogLevel  string // children's --raft-log-level (into DataDir/mN.log); default critical
	// ElectionTimeout is the children's --election-timeout; 0: the
	// server's default.
	ElectionTimeout time.Duration
	// MemoryLimit is the children's --memory-limit; "": the server's
	// default.
	MemoryLimit string
	// AgentsPerProcess is the most simulated agents one process runs;
	// default fleet.AgentsPerProcess. (Tests lower it to run a small fleet
	// split.)
	AgentsPerProcess int

	Phases          []string      // the phases switched on; default AllPhases
	RampTimeout     time.Duration // longest wait for every task to run after the creates; default 45s
	Churn           time.Duration // churn phase length; default 15s
	Faults          time.Duration // fault phase length (churn goes on during it); default 20s
	QuiesceTimeout  time.Duration // longest wait for convergence; default 40s
	ChurnRate       float64       // churn operations per second; default 4
	CrashRate       float64       // task processes crashed per second during churn and faults; default 5
	FaultShare      float64       // most agents faulted at once (share of Agents); default 0.1
	FaultEvery      time.Duration // how often an agent is disconnected or vanishes; default 250ms
	LeaderKillEvery time.Duration // SIGKILL the leader replica this often in the fault phase (owned clusters); default 10s; <0: never

	// FleetWorkers is how many fleet workers (`shoal loadgen fleet`, on
	// other hosts) the run waits for and spreads its agents over; 0: the
	// agents run in local child processes only.
	FleetWorkers int
	// FleetListen is where the workers connect (host:port); default
	// ":7790".
	FleetListen string
	// FleetLocal is how many of the agents run in local child processes
	// in a run with workers; default 0.
	FleetLocal int
	// FleetTokenFile, if set, is where the run's worker token is written.
	FleetTokenFile string
	// FleetWait is the longest wait for the workers; default 5 minutes.
	FleetWait time.Duration

	// Sim is the simulated tasks' stage table; zero: DefaultSim().
	Sim *agent.SimConfig

	AgentLog string // the agents' log file (warnings and errors); "" : discarded
	// AgentSetups is how many connection set-ups (joins, TLS handshakes)
	// the agents' processes on this machine run at once per CPU, shared
	// among them: 0 takes fleet.SetupsPerCPU, below 0 none is bounded.
	AgentSetups int
	PprofDir    string // fetch each replica's CPU profile (during the ramp) and heap (at the end) here; the loadgen profiles itself there too
	// ProfiledAlready says the loadgen's own CPU is profiled over the whole
	// run (loadgen --cpuprofile): PprofDir then gets no loadgen.*.cpu.prof
	// (one CPU profile at a time per process).
	ProfiledAlready bool
	// CheckReplay starts the managers with serve --check-replay (each
	// group's live state compared at every snapshot with one restored from
	// the last snapshot; differences go to the managers' logs).
	CheckReplay bool
	Thresholds  []string // e.g. "converge<20s", "running_p99<5s"

	Out      io.Writer // progress lines and violations; default io.Discard
	Terminal bool      // Out is a terminal: a live progress bar instead of a line every 5s
}

// DefaultSim is the stage table of simulated tasks: prepare and start take
// tens to hundreds of milliseconds and fail 1% of the time each; stops take
// up to 110ms; tasks run until stopped (the loadgen crashes some itself).
func DefaultSim() agent.SimConfig {
	return agent.SimConfig{
		Prepare: agent.SimStage{Delay: 20 * time.Millisecond, Jitter: 100 * time.Millisecond,
			Outcomes: []agent.SimOutcome{{Weight: 99}, {Weight: 1, Reject: "loadgen: image pull failed"}}},
		Start: agent.SimStage{Delay: 20 * time.Millisecond, Jitter: 200 * time.Millisecond,
			Outcomes: []agent.SimOutcome{{Weight: 99}, {Weight: 1, Reject: "loadgen: start failed"}}},
		Stop: agent.SimStage{Delay: 10 * time.Millisecond, Jitter: 100 * time.Millisecond},
	}
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Agents, 100)
	def(&c.Tasks, 1000)
	def(&c.Services, 20)
	def(&c.Managers, 3)
	if c.Seed == 0 {
		c.Seed = 1
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	// Agents sync every interval ±50 %: 5 s keeps quarantined addresses
	// moving at a thousand agents (~200 syncs/s, each a command in every
	// group the agent holds tasks of). Larger fleets keep that rate rather
	// than the interval: 10,000 agents syncing every 5 s sent the managers
	// 2,000 syncs/s, and the groups' apply fell behind the sync commands.
	defd(&c.SyncInterval, max(5*time.Second, time.Duration(c.Agents)*5*time.Millisecond))
	// The started managers share this machine's CPUs with the simulated
	// agents: from 5,000 agents on, Raft steps stalled past the server's
	// 500ms election timeout and leaders changed under the join (20 times
	// in two minutes at 10,000 agents; none at 2s). A killed leader is
	// replaced at once whatever the timeout.
	if len(c.Join) == 0 && c.Agents >= 5000 {
		defd(&c.ElectionTimeout, 2*time.Second)
	}
	if c.AgentsPerProcess <= 0 {
		c.AgentsPerProcess = fleet.AgentsPerProcess
	}
	defd(&c.FleetWait, 5*time.Minute)
	if c.FleetListen == "" {
		c.FleetListen = ":7790"
	}
	if c.FleetWorkers < 0 || c.FleetLocal < 0 {
		return c, errors.New("loadgen: --fleet-workers and --fleet-local must be 0 or more")
	}
	if c.FleetWorkers > 0 && c.FleetLocal >= c.Agents {
		return c, errors.New("loadgen: --fleet-local leaves no agents for the --fleet-workers")
	}
	defd(&c.RampTimeout, 45*time.Second)
	defd(&c.Churn, 15*time.Second)
	defd(&c.Faults, 20*time.Second)
	defd(&c.QuiesceTimeout, 40*time.Second)
	defd(&c.FaultEvery, 250*time.Millisecond)
	defd(&c.LeaderKillEvery, 10*time.Second)
	if c.ChurnRate <= 0 {
		c.ChurnRate = 4
	}
	if c.CrashRate < 0 {
		c.CrashRate = 0
	} else if c.CrashRate == 0 {
		c.CrashRate = 5
	}
	if c.FaultShare <= 0 {
		c.FaultShare = 0.1
	}
	if len(c.Phases) == 0 {
		c.Phases = AllPhases
	}
	for _, p := range c.Phases {
		if !slices.Contains(AllPhases, p) {
			return c, fmt.Errorf("loadgen: unknown phase %q (phases are %v)", p, AllPhases)
		}
	}
	if c.Sim == nil {
		s := DefaultSim()
		c.Sim = &s
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Services > c.Tasks {
		c.Services = c.Tasks
	}
	if c.Tasks <= 0 || c.Agents <= 0 {
		return c, errors.New("loadgen: --tasks and --agents must be 1 or more")
	}
	switch {
	case len(c.Join) > 0 && !c.Insecure && c.TLSDir == "":
		return c, errors.New("loadgen: --join drives managers with TLS: give --tls-dir (the admin credential, a manager's DATA-DIR/tls), " +
			"or --insecure for managers started with --insecure")
	case len(c.Join) == 0 && c.TLSDir != "":
		return c, errors.New("loadgen: --tls-dir is for --join; the managers the loadgen starts create their own CA")
	case c.Insecure && c.TLSDir != "":
		return c, errors.New("loadgen: --tls-dir and --insecure exclude each other")
	}
	return c, nil
}

func (c Config) on(phase string) bool { return slices.Contains(c.Phases, phase) }
