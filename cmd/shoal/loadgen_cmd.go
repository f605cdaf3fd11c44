package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"shoal/loadgen"
	"shoal/loadgen/fleet"
	"shoal/loadgen/report"
)

type loadgenOptions struct {
	cfg        loadgen.Config
	join       string
	phases     string
	jsonFile   string
	reportFile string
	cpuProfile string
	memProfile string
	seed       uint64
}

func newLoadgenCmd() *cobra.Command {
	var o loadgenOptions
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Drive a cluster with simulated agents through churn and faults, checking invariants online",
		Long: `Start three managers (shoal serve child processes of this binary on free
loopback ports) or join existing ones, run --agents simulated agents (the real
agent code with a simulated executor) against them over HTTPS with mutual
TLS (--insecure: plain HTTP), and drive a seeded workload of --tasks tasks
in --services services through phases:

  ramp     create networks and services; wait until every task runs
  churn    scale up and down, rolling updates, remove and re-create, task crashes
  faults   churn goes on; agents disconnect and vanish (kill -9) and come back;
           the leader replica is SIGKILLed every --leader-kill-every and restarted
  quiesce  faults stop, services go back to the plan; time to convergence

Invariants of the task model are checked online from the event stream and the
agents' own view; any violation is printed with the objects involved and
makes the exit status non-zero, as do a failed convergence and a failed
--threshold ('converge<20s', 'running_p99<5s', 'heap_per_task<1024',
'violations<1', 'ramp<30s').

  shoal loadgen --agents 1000 --tasks 100000 --json run.json --report run.html --pprof-dir prof

Beyond one machine, --fleet-workers N waits for N fleet workers on other hosts
(shoal loadgen fleet --coordinator ADDR --token TOKEN, with the token this run
prints) and runs the agents on them; see docs/loadgen-fleet.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLoadgen(cmd, o) },
	}
	f := cmd.Flags()
	c := &o.cfg
	f.IntVar(&c.Agents, "agents", 100, "simulated agents (nodes)")
	f.IntVar(&c.Tasks, "tasks", 1000, "tasks at quiescence (the sum of the services' replicas)")
	f.IntVar(&c.Services, "services", 20, "services")
	f.IntVar(&c.Managers, "managers", 3, "manager replicas to start as child processes")
	f.StringVar(&o.join, "join", "", "drive existing managers host:port,... instead of starting any")
	f.BoolVar(&c.Insecure, "insecure", false, "plain HTTP: start the managers with --insecure, or drive --join managers started so (default: TLS, agents join with the worker token)")
	f.StringVar(&c.TLSDir, "tls-dir", os.Getenv("SHOAL_TLS_DIR"), "with --join: the admin credential, ca.crt, admin.crt and admin.key (a manager's DATA-DIR/tls; env SHOAL_TLS_DIR)")
	f.IntVar(&c.Groups, "groups", 0, "service groups of the started managers (default: the server's)")
	f.StringVar(&c.DataDir, "data-dir", "", "the started managers' data and logs (default: a temporary directory, removed after a clean run)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the workload, the stage tables and the faults (the same seed replays the same workload)")
	f.DurationVar(&c.SyncInterval, "sync-interval", 0, "the started managers' --sync-interval (default 5s, or 5ms per agent above 1,000 agents)")
	f.DurationVar(&c.OrphanTimeout, "orphan-timeout", 0, "the started managers' --orphan-timeout (with --join: the one the managers were given); agents are cut off or vanish for at most half of it (default: the server's, 24h)")
	f.DurationVar(&c.MinHeartbeat, "min-heartbeat", 0, "the started managers' --min-heartbeat (default: the server's)")
	f.StringVar(&c.MemoryLimit, "memory-limit", "", "the started managers' --memory-limit (default: the server's)")
	f.DurationVar(&c.ElectionTimeout, "election-timeout", 0, "the started managers' --election-timeout (default: the server's; 2s from 5,000 agents on, since the simulated agents share the managers' CPUs)")
	f.StringVar(&c.RaftLogLevel, "raft-log-level", "critical", "the started managers' --raft-log-level (their logs go to --data-dir; warning shows every election)")
	f.StringVar(&o.phases, "phases", strings.Join(loadgen.AllPhases, ","), "phases to run, comma-separated")
	f.DurationVar(&c.RampTimeout, "ramp-timeout", 0, "longest wait for every task to run after the creates (default 45s)")
	f.DurationVar(&c.Churn, "churn", 0, "churn phase length (default 15s)")
	f.DurationVar(&c.Faults, "faults", 0, "fault phase length (default 20s)")
	f.DurationVar(&c.QuiesceTimeout, "quiesce-timeout", 0, "longest wait for convergence (default 40s)")
	f.Float64Var(&c.ChurnRate, "churn-rate", 0, "churn operations per second (default 4)")
	f.Float64Var(&c.CrashRate, "crash-rate", 0, "task processes crashed per second in churn and faults (default 5; negative: none)")
	f.Float64Var(&c.FaultShare, "fault-share", 0, "most agents faulted at once, as a share of --agents (default 0.1)")
	f.DurationVar(&c.LeaderKillEvery, "leader-kill-every", 0, "SIGKILL the leader replica this often in the fault phase (default 10s; negative: never)")
	f.StringVar(&c.AgentLog, "agent-log", "", "write the simulated agents' warnings and errors to this file (default: discarded)")
	f.IntVar(&c.AgentSetups, "agent-setups", 0, "connection set-ups (joins, TLS handshakes) the simulated agents' processes on this machine run at once per CPU, shared among them; the rest wait their turn as agents on hosts of their own would (default 128; -1: no bound, every agent's at once)")
	f.StringVar(&o.jsonFile, "json", "", "write the machine-readable report (loadgen/report) to this file")
	f.StringVar(&o.reportFile, "report", "", "write a self-contained HTML report (charts, invariants; opens offline) to this file")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write the loadgen's own CPU profile to this file (its simulated agents run in a child process of their own, not in it)")
	f.StringVar(&o.memProfile, "memprofile", "", "write the loadgen's own heap profile to this file")
	f.StringVar(&c.PprofDir, "pprof-dir", "", "fetch each replica's CPU profiles (while the services are created, then while their tasks start: mN.cpu.prof, mN.ramp.cpu.prof; and for 15 s after each leader kill, the survivors: mN.killK.cpu.prof) and heap profile (at the end) into this directory; each simulated agents' process writes its CPU profiles there too: agentsN.setup.cpu.prof (its start until the ramp), agentsN.ramp.cpu.prof (the ramp), agentsN.rest.cpu.prof (after it); and the loadgen its own, unless --cpuprofile: loadgen.ramp.cpu.prof, loadgen.rest.cpu.prof")
	f.BoolVar(&c.CheckReplay, "check-replay", false, "start the managers with serve --check-replay (determinism check at every snapshot; doubles their apply cost)")
	f.StringArrayVar(&c.Thresholds, "threshold", nil, "a pass/fail threshold, e.g. 'converge<20s' (repeatable)")
	f.IntVar(&c.FleetWorkers, "fleet-workers", 0, "wait for this many fleet workers (shoal loadgen fleet, on other hosts) and run the agents on them (docs/loadgen-fleet.md)")
	f.StringVar(&c.FleetListen, "fleet-listen", ":7790", "with --fleet-workers: where the workers connect (TLS, with a token of this run's own)")
	f.IntVar(&c.FleetLocal, "fleet-local", 0, "with --fleet-workers: how many of the agents run in this host's own processes")
	f.StringVar(&c.FleetTokenFile, "fleet-token-file", "", "with --fleet-workers: also write the workers' token to this file")
	f.DurationVar(&c.FleetWait, "fleet-wait", 5*time.Minute, "with --fleet-workers: the longest wait for the workers to connect")
	cmd.AddCommand(newLoadgenWorkerCmd())
	return cmd
}

func runLoadgen(cmd *cobra.Command, o loadgenOptions) error {
	if err := checkLoadgenFlags(cmd, o); err != nil {
		return err
	}
	cfg := o.cfg
	cfg.Seed = o.seed
	if o.join != "" {
		cfg.Join = strings.Split(o.join, ",")
	}
	if o.phases != "" {
		cfg.Phases = strings.Split(o.phases, ",")
	} else {
		cfg.Phases = []string{}
	}
	out := cmd.OutOrStdout()
	cfg.Out = out
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			cfg.Terminal = true
		}
	}
	if cfg.PprofDir != "" {
		if err := os.MkdirAll(cfg.PprofDir, 0o755); err != nil {
			return err
		}
	}
	if o.cpuProfile != "" {
		cfg.ProfiledAlready = true
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := loadgen.Run(ctx, cfg)
	if rep == nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return errors.New("loadgen: interrupted while setting up, before the run began: no report")
		}
		return err
	}
	if o.memProfile != "" {
		runtime.GC()
		if f, ferr := os.Create(o.memProfile); ferr == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
			rep.Profiles = append(rep.Profiles, o.memProfile)
		}
	}
	if o.cpuProfile != "" {
		rep.Profiles = append(rep.Profiles, o.cpuProfile)
	}
	for _, v := range rep.ViolationList {
		fmt.Fprintf(out, "VIOLATION %s at %.1fs: %s\n", v.Invariant, v.AtSeconds, v.Message)
		for _, obj := range v.Objects {
			fmt.Fprintf(out, "    %s\n", obj)
		}
	}
	if err := report.WriteTable(out, rep); err != nil {
		return err
	}
	if o.jsonFile != "" {
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr != nil {
			return jerr
		}
		if werr := os.WriteFile(o.jsonFile, append(b, '\n'), 0o644); werr != nil {
			return werr
		}
	}
	if o.reportFile != "" {
		if herr := report.WriteHTMLFile(o.reportFile, rep); herr != nil {
			return herr
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return errors.New("loadgen: interrupted; the report above covers the run up to then")
		}
		return err
	}
	var fails []string
	if rep.Violations > 0 {
		fails = append(fails, fmt.Sprintf("%d invariant violations", rep.Violations))
	}
	if !rep.Converged && contains(cfg.Phases, "quiesce") {
		fails = append(fails, "the cluster did not converge")
	}
	for _, th := range rep.Thresholds {
		if !th.OK {
			fails = append(fails, "threshold "+th.Expr+" failed")
		}
	}
	if len(fails) > 0 {
		return errors.New("loadgen: " + strings.Join(fails, "; "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// newLoadgenFleetCmd is the hidden command shoal loadgen starts to run its
// simulated agents in a process of their own (loadgen/fleet, serve.go).
func newLoadgenFleetCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "loadgen-fleet",
		Short:  "Run shoal loadgen's simulated agents (started by shoal loadgen)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := fleet.ParseChildConfig(os.Getenv(fleet.ConfigEnv))
			if err != nil {
				return err
			}
			fc := fleet.Config{}
			if cfg.AgentLog != "" {
				f, err := os.OpenFile(cfg.AgentLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return err
				}
				defer f.Close()
				fc.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}))
			}
			// The loadgen's end (or death) closes stdin: the agents stop.
			signal.Ignore(syscall.SIGINT)
			return fleet.Serve(cmd.Context(), cfg, os.Stdin, os.Stdout, os.NewFile(3, "observations"), fc)
		},
	}
}
