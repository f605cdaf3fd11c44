package loadgen

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"shoal/loadgen/report"
)

var profileWG sync.WaitGroup

// doRamp creates the workload and waits until every task runs.
func (r *run) doRamp(ctx context.Context) {
	r.setPhase("ramp")
	t0 := time.Now()
	// With --pprof-dir each replica's CPU is profiled twice: while the
	// services are created, then, once the creates are done, while the
	// agents start the tasks (one CPU profile at a time per process).
	createsDone := make(chan struct{})
	if r.cfg.PprofDir != "" {
		// The agents' processes profile the ramp alone too, from here
		// until the ramp ends (agentsN.ramp.cpu.prof): their set-up (joins,
		// first handshakes) has a file of its own.
		r.profileAgents("ramp")
		secs := int(min(r.cfg.RampTimeout, 20*time.Second) / time.Second)
		for _, rep := range r.cl.Replicas {
			profileWG.Add(1)
			go func() {
				defer profileWG.Done()
				for i, name := range []string{"cpu", "ramp.cpu"} {
					if i == 1 {
						select {
						case <-createsDone:
						case <-ctx.Done():
							return
						}
					}
					file := filepath.Join(r.cfg.PprofDir, fmt.Sprintf("m%d.%s.prof", rep.ID, name))
					r.profMu.Lock()
					r.profiles = append(r.profiles, file)
					r.profMu.Unlock()
					if err := r.cl.Access.FetchProfile(ctx, rep.API, fmt.Sprintf("profile?seconds=%d", secs), file); err != nil {
						r.logf("pprof: %v", err)
					}
				}
			}()
		}
	}
	if err := r.driver.Ramp(ctx, 8); err != nil {
		r.logf("%v", err)
	}
	close(createsDone)
	created := time.Since(t0)
	ph := report.Phase{Name: "ramp", StartSeconds: t0.Sub(r.start).Seconds()}
	if !r.cfg.on("ramp") {
		r.profileAgents("rest")
		ph.Note = fmt.Sprintf("created only (%.1fs); not waited for", created.Seconds())
		ph.Seconds = created.Seconds()
		r.phases = append(r.phases, ph)
		return
	}
	// The cluster's count (the services' running tasks, read from the
	// API), not the event stream's view: under load the view trails the
	// cluster by tens of thousands of tasks.
	deadline := time.Now().Add(r.cfg.RampTimeout) // after the creates, as --ramp-timeout says
	// Reading every service walks every task on the managers: every 250ms
	// up to 250,000 tasks, then less often (1s at a million), so that the
	// measuring does not become the load.
	every := min(max(time.Duration(r.cfg.Tasks)*time.Microsecond, 250*time.Millisecond), time.Second)
	running, read := 0, false
	var readErr error
	for ctx.Err() == nil && time.Now().Before(deadline) {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		if rn, _, _, err := r.driver.Converged(cctx); err == nil {
			running, read = rn, true
		} else {
			readErr = err
		}
		cancel()
		if running >= r.cfg.Tasks {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	ph.Seconds = time.Since(t0).Seconds()
	r.profileAgents("rest")
	if running >= r.cfg.Tasks {
		ph.Note = fmt.Sprintf("%d tasks running %.1fs after the first create (creates took %.1fs)", running, ph.Seconds, created.Seconds())
	} else if read {
		r.rampShort = true
		ph.Note = fmt.Sprintf("timed out with %d/%d running (creates took %.1fs)", running, r.cfg.Tasks, created.Seconds())
	} else {
		r.rampShort = true
		ph.Note = fmt.Sprintf("timed out: the services' counts could not be read (%v; creates took %.1fs)", readErr, created.Seconds())
	}
	r.logf("%s", ph.Note)
	r.phases = append(r.phases, ph)
	r.rampLatencies(ctx, running)
}

// profileAgents starts the window of the agents' processes' CPU profiles
// and the loadgen's own (with --pprof-dir).
func (r *run) profileAgents(window string) {
	if r.cfg.PprofDir == "" {
		return
	}
	if err := r.fleet.Profile(window); err != nil {
		r.logf("pprof: %v", err)
	}
	if r.cfg.ProfiledAlready {
		return
	}
	if file, err := r.selfProf.start(r.cfg.PprofDir, window); err != nil {
		r.logf("pprof: %v", err)
	} else {
		r.profMu.Lock()
		r.profiles = append(r.profiles, file)
		r.profMu.Unlock()
	}
}

// doQuiesce ends the churn's changes (faults already healed), restores
// the plan and waits until every service runs its planned replicas; then it
// checks the quiescence invariants on the stream's view.
func (r *run) doQuiesce(ctx context.Context) (bool, float64) {
	if !r.cfg.on("quiesce") || ctx.Err() != nil {
		r.phases = append(r.phases, report.Phase{Name: "quiesce", Skipped: true})
		return false, -1
	}
	r.setPhase("quiesce")
	t0 := time.Now()
	qctx, cancel := context.WithTimeout(ctx, r.cfg.QuiesceTimeout)
	defer cancel()
	ph := report.Phase{Name: "quiesce", StartSeconds: t0.Sub(r.start).Seconds()}
	// The restore runs beside the convergence checks: under load its
	// scales can take the whole phase, and the cluster's count is still
	// worth knowing (a restore that blocked the loop left "0 running").
	restoring := make(chan struct{})
	restore := func() {
		restoring = make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			if err := r.driver.Restore(qctx); err != nil && qctx.Err() == nil {
				r.logf("%v", err)
			}
		}(restoring)
	}
	restore()
	defer func() { cancel(); <-restoring }()
	want := r.driver.Desired()
	converged := false
	var running, desired int
	lastRestore := time.Now()
	for qctx.Err() == nil {
		rn, ds, ok, err := r.driver.Converged(qctx)
		if err == nil {
			running, desired = rn, ds
		}
		if err == nil && ok && running == r.cfg.Tasks {
			converged = true
			break
		}
		select {
		case <-restoring:
			if err == nil && !ok && time.Since(lastRestore) > 3*time.Second {
				// A restore that failed (or whose answer was lost) is
				// repeated until the plan holds.
				lastRestore = time.Now()
				restore()
			}
		default:
		}
		select {
		case <-qctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	conv := time.Since(t0).Seconds()
	if converged {
		ph.Note = fmt.Sprintf("converged in %.2fs: %d/%d running", conv, running, desired)
	} else {
		ph.Note = fmt.Sprintf("did not converge in %v: %d running, %d desired (want %d)", r.cfg.QuiesceTimeout, running, desired, r.cfg.Tasks)
		conv = -1
	}
	r.logf("%s", ph.Note)
	if !converged {
		// One liveness violation, not one per service from a view that may
		// lag as far as the cluster does.
		lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
		lagging := r.driver.Lagging(lctx, 5, r.fleet.Probe)
		lcancel()
		r.checker.NotConverged(fmt.Sprintf("the cluster did not converge within %v of the quiesce phase: %d running, %d desired, want %d",
			r.cfg.QuiesceTimeout, running, desired, r.cfg.Tasks), time.Now(), lagging...)
		ph.Seconds = time.Since(t0).Seconds()
		r.phases = append(r.phases, ph)
		return false, -1
	}
	// The stream's view catches up, then the quiescence checks: until its
	// counts match the plan, or it got no change for 5 s (drained: what
	// it shows is all there is), at most 2 minutes. A fixed 15 s bound
	// checked a view still behind a 100k ramp (a slot's old task still
	// running there, services short) and reported what the cluster had
	// long left behind.
	deadline := time.Now().Add(2 * time.Minute)
	lastPos, moved := positionSum(r.follower.Position()), time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil && time.Since(moved) < 5*time.Second {
		if sameCounts(r.checker.Running(), want) {
			break
		}
		if p := positionSum(r.follower.Position()); p != lastPos {
			lastPos, moved = p, time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.checker.Quiesced(want, time.Now())
	ph.Seconds = time.Since(t0).Seconds()
	r.phases = append(r.phases, ph)
	return converged, conv
}

func sameCounts(a, b map[string]int) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// buildReport gathers the run's figures.
func (r *run) buildReport(ctx context.Context, converged bool, convergeSecs float64) *report.Report {
	cfg := r.cfg
	rep := &report.Report{Version: report.Version, Seed: cfg.Seed, StartedAt: r.start.UTC().Format(time.RFC3339),
		Machine:   machine(r.load),
		Converged: converged, ConvergeSeconds: convergeSecs, Phases: r.phases}
	rep.Params = report.Params{Agents: cfg.Agents, Tasks: cfg.Tasks, Services: len(r.plan.Services), Networks: len(r.plan.Networks),
		Join: cfg.Join, Groups: cfg.Groups, SyncSeconds: cfg.SyncInterval.Seconds(), RampSeconds: cfg.RampTimeout.Seconds(),
		ChurnSeconds: cfg.Churn.Seconds(), FaultSeconds: cfg.Faults.Seconds(), QuiesceSeconds: cfg.QuiesceTimeout.Seconds(),
		ChurnRate: cfg.ChurnRate, FaultShare: cfg.FaultShare, Phases: cfg.Phases}
	if len(cfg.Join) == 0 {
		rep.Params.Managers = cfg.Managers
		rep.Params.LeaderKillSecs = cfg.LeaderKillEvery.Seconds()
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if running, _, _, err := r.driver.Converged(cctx); err == nil {
		rep.TasksRunning = running
	}
	cancel()
	// One last sample so the heap read is from the end of the run.
	r.sampler.sample(ctx)
	c := &r.driver.Counts
	ev, reconn, resync := r.follower.Stats()
	tr, seen := r.stats.counts()
	rep.Counts = report.Counts{NetworksCreated: int(c.Networks.Load()), ServicesCreated: int(c.Services.Load()),
		Scales: int(c.Scales.Load()), Updates: int(c.Updates.Load()), Removes: int(c.Removes.Load()), Recreates: int(c.Recreates.Load()),
		APIErrors: int(c.Errors.Load()), APIErrorList: r.driver.Errors(), Interrupted: int(c.Interrupted.Load()), Crashes: int(r.counts.crashes.Load()), Disconnects: int(r.counts.disconnects.Load()),
		Vanishes: int(r.counts.vanishes.Load()), LeaderKills: int(r.counts.leaderKills.Load()), Events: ev, Transitions: tr,
		StreamReconnects: reconn, StreamResyncs: resync, TasksSeen: seen, BeatAgeMax: r.sampler.beatAgeMax()}
	rep.Counts.LeaderKillRecovery = r.reconnectSeconds()
	r.reconnects.Lock()
	rep.Counts.LeaderKillDetail = append([]report.KillRecovery(nil), r.reconnects.detail...)
	r.reconnects.Unlock()
	rep.Latencies = r.stats.latencies()
	rep.Transitions = r.sampler.rate()
	rep.Series = r.sampler.series()
	for i := range rep.Phases {
		if !rep.Phases[i].Skipped {
			rep.Phases[i].CPUSeconds = report.PhaseCPU(rep.Series, rep.Phases[i])
			rep.Phases[i].CPUMicrosPerTask = report.PerTask(rep.Phases[i].CPUSeconds, cfg.Tasks)
		}
	}
	rep.Groups = r.sampler.proposals(time.Since(r.start).Seconds())
	rep.AgentCalls = r.sampler.agentCalls(r.cfg.Agents, time.Since(r.start).Seconds())
	r.sampler.mu.Lock()
	for _, rp := range r.cl.Replicas {
		rep.Replicas = append(rep.Replicas, report.Replica{ID: rp.ID, API: rp.API, HeapInuseEnd: r.sampler.last[rp.ID],
			HeapInusePeak: r.sampler.peak[rp.ID], HeapLiveEnd: r.sampler.live[rp.ID], Kills: rp.Kills(),
			CPUSeconds: r.sampler.cpu.total(replicaSource(rp.ID))})
		rep.HeapBytesPerTask = max(rep.HeapBytesPerTask, float64(r.sampler.last[rp.ID])/float64(cfg.Tasks))
		rep.HeapLiveBytesPerTask = max(rep.HeapLiveBytesPerTask, float64(r.sampler.live[rp.ID])/float64(cfg.Tasks))
	}
	r.sampler.mu.Unlock()
	rep.Invariants = r.checker.Results()
	rep.ViolationList = r.checker.Violations()
	rep.Violations = r.checker.Count()
	rep.TotalSeconds = time.Since(r.start).Seconds()
	rep.Thresholds = evalThresholds(cfg.Thresholds, rep)
	r.fleetReport(rep)
	return rep
}

// fetchHeaps saves each replica's heap profile (with --pprof-dir) and
// waits for the CPU profiles.
func (r *run) fetchHeaps(ctx context.Context, rep *report.Report) {
	if r.cfg.PprofDir == "" {
		return
	}
	r.selfProf.stop()
	runtime.GC()
	for _, rp := range r.cl.Replicas {
		if !rp.Alive() {
			continue
		}
		file := filepath.Join(r.cfg.PprofDir, fmt.Sprintf("m%d.heap.prof", rp.ID))
		if err := r.cl.Access.FetchProfile(ctx, rp.API, "heap", file); err != nil {
			r.logf("pprof: %v", err)
			continue
		}
		r.profMu.Lock()
		r.profiles = append(r.profiles, file)
		r.profMu.Unlock()
	}
	profileWG.Wait()
	r.profMu.Lock()
	rep.Profiles = append(rep.Profiles, r.profiles...)
	r.profMu.Unlock()
}

// positionSum adds a stream position's per-group Raft indexes: it changes
// whenever the stream delivers a change.
func positionSum(pos map[int]uint64) uint64 {
	var n uint64
	for _, i := range pos {
		n += i
	}
	return n
}
