package loadgen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"shoal/api/client"
	"shoal/loadgen/check"
	"shoal/loadgen/cluster"
	"shoal/loadgen/fleet"
	"shoal/loadgen/report"
	"shoal/loadgen/watch"
	"shoal/loadgen/workload"
)

// agents is the simulated fleet as the run drives it (fleet.Remote: the
// agents run in processes of their own).
type agents interface {
	Partition(i int, d time.Duration)
	Vanish(i int) bool
	Return(i int)
	Gone(i int) bool
	Connected() int
	BeatAge() time.Duration
	Live() []bool
	Nodes() []uint32
	Crash(i, n int) int
	Probe(node uint32, task uint64) string
	FirstBeats(since int64) []int64
	SyncNow(within time.Duration)
	// Profile starts the named window of the agents' processes' CPU
	// profiles (with --pprof-dir), ending the one under way.
	Profile(window string) error
	Stop()
}

// run is one loadgen run in progress.
type run struct {
	cfg   Config
	ctx   context.Context
	start time.Time
	load  string // the load average when the run began
	// rampShort: the ramp timed out before every task ran (its data is
	// kept, see keepData).
	rampShort bool
	cl        *cluster.Cluster
	fleet     agents
	checker   *check.Checker
	stats     *stats
	follower  *watch.Follower
	driver    *workload.Driver
	plan      workload.Plan
	sampler   *sampler
	phaseMu   sync.Mutex
	phaseNow  string
	phases    []report.Phase
	profMu    sync.Mutex
	profiles  []string // profile files written (profMu)
	selfProf  selfProfile
	counts    struct {
		crashes, disconnects, vanishes, leaderKills atomic.Int64
	}
	workers    *fleetHub // with fleet workers (FleetWorkers): their listener
	reconnects struct {
		sync.Mutex
		detail []report.KillRecovery // per leader kill timed to the end
	}
}

func (r *run) recordReconnect(k report.KillRecovery) {
	r.reconnects.Lock()
	r.reconnects.detail = append(r.reconnects.detail, k)
	r.reconnects.Unlock()
}

// reconnectSeconds returns, per leader kill timed to the end, the seconds
// until every agent had reached the new leader.
func (r *run) reconnectSeconds() []float64 {
	r.reconnects.Lock()
	defer r.reconnects.Unlock()
	var s []float64
	for _, k := range r.reconnects.detail {
		s = append(s, k.AllSeconds)
	}
	return s
}

func (r *run) phase() string {
	r.phaseMu.Lock()
	defer r.phaseMu.Unlock()
	return r.phaseNow
}

func (r *run) setPhase(p string) {
	r.phaseMu.Lock()
	r.phaseNow = p
	r.phaseMu.Unlock()
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Out, "%5.0fs %-7s "+format+"\n", append([]any{time.Since(r.start).Seconds(), r.phase()}, args...)...)
}

// Run runs the load generator and returns its report. An error means the
// run could not be carried out (managers did not start, ...); violations
// and convergence are in the report.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := raiseFileLimit(); err != nil {
		fmt.Fprintln(cfg.Out, "loadgen: cannot raise the open-file limit:", err)
	}
	r := &run{cfg: cfg, ctx: ctx, start: time.Now(), stats: newStats(cfg.Tasks), load: loadAvg()}
	r.checker = check.New(r.start)
	r.checker.Expect(cfg.Tasks)
	r.checker.OnTiming(r.stats.timing) // each task's timing kept in its view
	r.setPhase("setup")
	tempDir := false
	if cfg.DataDir == "" {
		d, err := os.MkdirTemp("", "shoal-loadgen-")
		if err != nil {
			return nil, err
		}
		cfg.DataDir, r.cfg.DataDir, tempDir = d, d, true
		// A run refused during setup leaves no empty directory behind
		// (Remove takes only an empty one: replica logs stay).
		defer os.Remove(d)
	}
	if err := r.listenFleet(); err != nil {
		return nil, err
	}
	if r.workers != nil {
		defer r.workers.hub.Close()
	}
	if len(cfg.Join) > 0 {
		access := &cluster.Access{}
		if !cfg.Insecure {
			if access, err = cluster.AdminAccess(ctx, cfg.TLSDir, cfg.Join[0]); err != nil {
				return nil, fmt.Errorf("loadgen: the admin credential: %w", err)
			}
		}
		r.cl, err = cluster.Join(ctx, cfg.Join, access)
	} else {
		r.logf("starting %d managers (data and logs in %s)", cfg.Managers, cfg.DataDir)
		r.cl, err = cluster.Start(ctx, cluster.Config{Binary: cfg.Binary, Managers: cfg.Managers, DataDir: cfg.DataDir,
			Groups: cfg.Groups, SyncInterval: cfg.SyncInterval, MinHeartbeat: cfg.MinHeartbeat, OrphanTimeout: cfg.OrphanTimeout, RaftLogLevel: cfg.RaftLogLevel, ElectionTimeout: cfg.ElectionTimeout, MemoryLimit: cfg.MemoryLimit, Pprof: cfg.PprofDir != "", CheckReplay: cfg.CheckReplay, Insecure: cfg.Insecure})
	}
	if err != nil {
		return nil, err
	}
	defer r.cl.Close()
	apis := r.cl.APIs()
	st, err := r.cl.Access.Status(ctx, apis[0])
	if err != nil {
		return nil, fmt.Errorf("loadgen: status of %s: %w", apis[0], err)
	}

	r.plan = workload.NewPlan(cfg.Seed, cfg.Tasks, cfg.Services, len(st.Groups)-1)
	if len(cfg.Join) > 0 {
		r.plan.Constraints = []string{fleet.OnlySimNodes}
		own := r.plan.Names()
		r.checker.Only(func(service string) bool { return own[service] })
	}
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var bg sync.WaitGroup
	r.follower = watch.New(watch.Config{Managers: apis, Index: st.Index,
		Event: func(ev client.Event, conn int, read time.Time) {
			r.checker.Event(ev, conn, read)
			r.stats.event(ev)
		},
		Resync: func(tasks []client.Task, conn int) { r.checker.Reset(tasks, conn, time.Now()) },
		Dial:   r.cl.Access.Client})
	bg.Add(1)
	go func() { defer bg.Done(); r.follower.Follow(runCtx) }()

	r.driver, err = workload.NewDriver(runCtx, r.plan, apis, r.cl.Access.Client, cfg.Seed)
	if err != nil {
		return nil, err
	}
	if len(cfg.Join) > 0 {
		if err := r.refuseLeftovers(runCtx); err != nil {
			return nil, err
		}
	}

	if cfg.AgentLog != "" {
		f, err := os.Create(cfg.AgentLog) // the agents' process appends
		if err != nil {
			return nil, err
		}
		f.Close()
	}
	bin := cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	per := cfg.AgentsPerProcess
	procs := (cfg.Agents + per - 1) / per
	if r.workers != nil {
		// said once the workers are in (startAgents)
	} else if procs > 1 {
		r.logf("starting %d simulated agents (in %d processes of their own, %d at most each)", cfg.Agents, procs, per)
	} else {
		r.logf("starting %d simulated agents (in a process of their own)", cfg.Agents)
	}
	cc := fleet.ChildConfig{Managers: apis, Agents: cfg.Agents, Seed: cfg.Seed, Sim: *cfg.Sim,
		Token: r.cl.Access.WorkerToken, AgentLog: cfg.AgentLog, Setups: cfg.AgentSetups}
	if cfg.PprofDir != "" {
		if err := os.MkdirAll(cfg.PprofDir, 0o755); err != nil {
			return nil, err
		}
		cc.CPUProfile = filepath.Join(cfg.PprofDir, "agents%d.%%s.cpu.prof")
		cc.AllocsProfile = filepath.Join(cfg.PprofDir, "agents%d.%%s.allocs.prof")
	}
	agentsStart := time.Now()
	r.fleet, err = r.startAgents(runCtx, bin, cc, per)
	if err != nil {
		return nil, err
	}
	if r.workers != nil {
		agentsStart = time.Now() // not the wait for the workers
	}
	r.checker.SetProbe(r.fleet.Probe)
	r.sampler = newSampler(r)
	sctx, stopSampler := context.WithCancel(runCtx)
	defer stopSampler()
	samplerDone := make(chan struct{})
	bg.Add(1)
	go func() { defer bg.Done(); defer close(samplerDone); r.sampler.loop(sctx) }()

	bg.Add(1)
	go func() { defer bg.Done(); r.confirmSuspects(runCtx) }()
	r.phases = []report.Phase{r.waitAgents(runCtx, agentsStart)}
	r.doRamp(runCtx)
	r.timed(runCtx, "churn", cfg.Churn, func(c context.Context) { r.churn(c) })
	r.timed(runCtx, "faults", cfg.Faults, func(c context.Context) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); r.churn(c) }()
		r.runFaults(c)
		wg.Wait()
	})
	converged, convergeSecs := r.doQuiesce(runCtx)
	if cfg.on("quiesce") && runCtx.Err() == nil {
		r.checkReplicasAgree(runCtx, 15*time.Second)
	}

	r.settleSuspects(runCtx, true)
	// The report's last sample is its own: no sample of the loop may
	// overlap it or follow it into the series the report holds.
	stopSampler()
	<-samplerDone
	rep := r.buildReport(runCtx, converged, convergeSecs)
	r.fetchHeaps(runCtx, rep)
	if len(cfg.Join) > 0 {
		r.cleanup(runCtx)
	}
	r.fleet.Stop()
	stopAll()
	bg.Wait()
	if tempDir && !keepData(rep.Violations, converged || !cfg.on("quiesce"), r.rampShort) {
		r.cl.Close()
		_ = os.RemoveAll(cfg.DataDir)
	} else {
		fmt.Fprintln(cfg.Out, "loadgen: managers' data and logs kept in", cfg.DataDir)
	}
	return rep, ctx.Err()
}

// keepData says whether a run keeps its temporary data directory (the
// managers' data and logs) for a look afterwards: when it found a
// violation, did not converge, or its ramp timed out short of its tasks
// (a stuck tail is read from the tasks' messages in that data).
func keepData(violations int, convergedOrNoQuiesce, rampShort bool) bool {
	return violations > 0 || !convergedOrNoQuiesce || rampShort
}

// timed runs one phase for d (if switched on).
func (r *run) timed(ctx context.Context, name string, d time.Duration, f func(context.Context)) {
	if !r.cfg.on(name) || ctx.Err() != nil {
		r.phases = append(r.phases, report.Phase{Name: name, Skipped: true})
		return
	}
	r.setPhase(name)
	t0 := time.Now()
	pctx, cancel := context.WithTimeout(ctx, d)
	f(pctx)
	cancel()
	r.phases = append(r.phases, report.Phase{Name: name, StartSeconds: t0.Sub(r.start).Seconds(), Seconds: time.Since(t0).Seconds()})
}

// churn carries out seeded operations at ChurnRate and crashes tasks at
// CrashRate until ctx ends.
func (r *run) churn(ctx context.Context) {
	every := time.Duration(float64(time.Second) / r.cfg.ChurnRate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var crash <-chan time.Time
	if r.cfg.CrashRate > 0 {
		ct := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.CrashRate))
		defer ct.Stop()
		crash = ct.C
	}
	i := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.driver.Churn(ctx)
		case <-crash:
			i++
			n := r.fleet.Crash(int(r.cfg.Seed+uint64(i)*7919)%r.cfg.Agents, 1)
			r.counts.crashes.Add(int64(n))
		}
	}
}
