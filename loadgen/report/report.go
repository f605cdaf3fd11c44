package report

// Version is the schema version written in Report.Version.
const Version = 1

// Report is one loadgen run.
type Report struct {
	Version int `json:"version"`
	// TasksRunning is the number of running tasks at the end of the run (the
	// sum of the services' running counts, read from the API).
	TasksRunning int `json:"tasks_running"`
	// Violations counts every invariant violation seen.
	Violations int `json:"violations"`
	// ConvergeSeconds is how long the cluster took, from the start of the
	// quiesce phase, to have every service at its desired running count
	// (desired total back to --tasks); -1 if it did not converge in time or
	// the phase was off.
	ConvergeSeconds float64 `json:"converge_seconds"`
	Converged       bool    `json:"converged"`
	// HeapBytesPerTask is the largest, over replicas, of
	// go_memstats_heap_inuse_bytes divided by Params.Tasks, read at the end.
	HeapBytesPerTask float64 `json:"heap_bytes_per_task"`
	// HeapLiveBytesPerTask is the largest, over replicas, of the heap the
	// last collection found live (go_gc_heap_live_bytes) divided by
	// Params.Tasks, read at the end. HeapBytesPerTask also counts what was
	// allocated since that collection (garbage among it) and the free room
	// of partly used spans, which swings with the moment of the reading.
	HeapLiveBytesPerTask float64 `json:"heap_live_bytes_per_task"`

	Seed         uint64    `json:"seed"`
	Params       Params    `json:"params"`
	StartedAt    string    `json:"started_at"` // RFC 3339
	Machine      Machine   `json:"machine"`
	TotalSeconds float64   `json:"total_seconds"`
	Phases       []Phase   `json:"phases"`
	Counts       Counts    `json:"counts"`
	Latencies    []Latency `json:"latencies"`
	Transitions  Rate      `json:"transitions_per_second"`
	Replicas     []Replica `json:"replicas"`
	// Groups are the proposals per Raft group, summed over replicas.
	Groups []GroupLoad `json:"groups"`
	// AgentCalls are the calls the agents made, per endpoint, as the
	// replicas counted them: what the agent protocol costs the managers.
	AgentCalls []AgentCalls `json:"agent_calls,omitempty"`
	Invariants []Invariant  `json:"invariants"`
	// ViolationList holds the first violations (at most 100) in the order
	// they were seen.
	ViolationList []Violation `json:"violation_list,omitempty"`
	Series        Series      `json:"series"`
	Thresholds    []Threshold `json:"thresholds,omitempty"`
	// Profiles lists the profile files written (loadgen and replicas).
	Profiles []string `json:"profiles,omitempty"`
	// Fleet describes the fleet workers on other hosts, when the run had
	// any (--fleet-workers).
	Fleet *Fleet `json:"fleet,omitempty"`
}

// Fleet is how a run with fleet workers spread its agents, and what the
// workers' clocks did to its figures.
type Fleet struct {
	// LocalAgents ran in the loadgen's own child processes.
	LocalAgents int           `json:"local_agents"`
	Workers     []FleetWorker `json:"workers"`
	// WorkersLost counts workers that ended (died, or lost their
	// connection) before the run let them go: a fault; their agents'
	// nodes went down.
	WorkersLost int `json:"workers_lost"`
	// LatencyClock says which clock the latencies were measured on.
	LatencyClock string `json:"latency_clock"`
	// MergeOrder says how the workers' observations were ordered.
	MergeOrder string `json:"merge_order"`
}

// FleetWorker is one fleet worker.
type FleetWorker struct {
	ID         int     `json:"id"`
	Host       string  `json:"host"`    // the hostname it gave
	Address    string  `json:"address"` // as the coordinator saw it
	FirstAgent int     `json:"first_agent"`
	Agents     int     `json:"agents"`
	CPUSeconds float64 `json:"cpu_seconds"` // the worker process's, at its last reading
	// ClockOffsetMs is the worker's clock minus the loadgen's, measured
	// over the connection, within ± ClockErrorMs.
	ClockOffsetMs float64 `json:"clock_offset_ms"`
	ClockErrorMs  float64 `json:"clock_error_ms"`
	Lost          bool    `json:"lost,omitempty"`
}

// Params are the run's parameters as given (after defaults).
type Params struct {
	Agents         int      `json:"agents"`
	Tasks          int      `json:"tasks"`
	Services       int      `json:"services"`
	Networks       int      `json:"networks"`
	Managers       int      `json:"managers"` // 0 with Join
	Join           []string `json:"join,omitempty"`
	Groups         int      `json:"groups,omitempty"`
	SyncSeconds    float64  `json:"sync_interval_seconds"`
	RampSeconds    float64  `json:"ramp_timeout_seconds"`
	ChurnSeconds   float64  `json:"churn_seconds"`
	FaultSeconds   float64  `json:"fault_seconds"`
	QuiesceSeconds float64  `json:"quiesce_timeout_seconds"`
	ChurnRate      float64  `json:"churn_ops_per_second"`
	LeaderKillSecs float64  `json:"leader_kill_every_seconds"`
	FaultShare     float64  `json:"fault_agent_share"`
	Phases         []string `json:"phases"` // the phases switched on
}

// Phase is one phase of the run.
type Phase struct {
	Name         string  `json:"name"` // ramp, churn, faults, quiesce
	StartSeconds float64 `json:"start_seconds"`
	Seconds      float64 `json:"seconds"`
	Skipped      bool    `json:"skipped,omitempty"`
	Note         string  `json:"note,omitempty"` // e.g. "timed out with 91234/100000 running"
	// CPUSeconds is the CPU time used during the phase by the replicas
	// (all together), the simulated agents' processes and the loadgen
	// itself ("replicas", "agents", "loadgen"), from the per-second
	// samples: with Seconds and Machine.CPUs it says how busy the
	// machine was, and who kept it busy.
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
	// CPUMicrosPerTask is CPUSeconds per task of the run (Params.Tasks),
	// in microseconds, per CPU group: unlike the phase's wall time it
	// does not grow because other work shared the machine.
	CPUMicrosPerTask map[string]float64 `json:"cpu_us_per_task,omitempty"`
}

// CPUGroups are the CPU groups a phase's CPU is told in, in order.
var CPUGroups = []string{"replicas", "agents", "loadgen"}

// CPUPerTask is the CPU group's microseconds per task of a run of tasks
// tasks in the phase: from CPUMicrosPerTask, or worked out from
// CPUSeconds for a report written before it was recorded; false when the
// group used no CPU that was read.
func (p Phase) CPUPerTask(group string, tasks int) (float64, bool) {
	if v, ok := p.CPUMicrosPerTask[group]; ok {
		return v, v > 0
	}
	v, ok := p.CPUSeconds[group]
	return v / float64(max(tasks, 1)) * 1e6, ok && v > 0
}

// PhaseRan returns the phase called name if the run ran it: not turned
// off, nor left out by a run that ended first.
func (r *Report) PhaseRan(name string) (Phase, bool) {
	for _, ph := range r.Phases {
		if ph.Name == name && !ph.Skipped {
			return ph, true
		}
	}
	return Phase{}, false
}

// quiesceRan reports whether the run's quiesce phase ran (it measures
// convergence).
func (r *Report) quiesceRan() bool {
	_, ran := r.PhaseRan("quiesce")
	return ran
}

// CoresBusy is how many cores the phase kept busy on average, every CPU
// group together; false when no CPU was read.
func (p Phase) CoresBusy() (float64, bool) {
	if p.Seconds <= 0 || len(p.CPUSeconds) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, v := range p.CPUSeconds {
		sum += v
	}
	return sum / p.Seconds, true
}

// Counts are what the run did and saw.
type Counts struct {
	NetworksCreated int `json:"networks_created"`
	ServicesCreated int `json:"services_created"`
	Scales          int `json:"scales"`
	Updates         int `json:"updates"`
	Removes         int `json:"removes"`
	Recreates       int `json:"recreates"`
	Crashes         int `json:"crashes"` // task processes made to exit by the loadgen
	Disconnects     int `json:"disconnects"`
	Vanishes        int `json:"vanishes"`
	LeaderKills     int `json:"leader_kills"`
	// LeaderKillRecovery is, per leader kill, the seconds until every
	// agent the loadgen was not faulting had a heartbeat succeed at the new
	// leader.
	LeaderKillRecovery []float64 `json:"leader_kill_recovery_seconds,omitempty"`
	// LeaderKillDetail is, per leader kill timed, how the fleet came back.
	LeaderKillDetail []KillRecovery `json:"leader_kill_detail,omitempty"`
	APIErrors        int            `json:"api_errors"` // user API calls that failed after retries
	// APIErrorList describes the first API errors (call: error).
	APIErrorList []string `json:"api_error_list,omitempty"`
	// Interrupted counts calls cut short by the end of their phase.
	Interrupted      int   `json:"api_calls_interrupted,omitempty"`
	Events           int64 `json:"events"`
	Transitions      int64 `json:"transitions"`
	StreamReconnects int   `json:"stream_reconnects"`
	StreamResyncs    int   `json:"stream_resyncs"`
	// BeatAgeMax is the largest BeatAge sampled (seconds).
	BeatAgeMax float64 `json:"agent_beat_age_max_seconds"`
	TasksSeen  int64   `json:"tasks_seen"`
}

// Latency is one latency distribution in milliseconds (HdrHistogram).
type Latency struct {
	Name  string  `json:"name"` // create_to_assigned, assigned_to_running, create_to_running
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	// Source says where the figures come from when not from the event
	// stream (a sample of tasks' histories when the stream fell behind).
	Source string `json:"source,omitempty"`
	// Buckets is the distribution for charts: upper bound (ms) → count.
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is one bar of a latency distribution.
type Bucket struct {
	UpToMs float64 `json:"up_to_ms"`
	Count  int64   `json:"count"`
}

// Rate summarizes a per-second rate.
type Rate struct {
	Mean float64 `json:"mean"`
	Peak float64 `json:"peak"`
}

// Replica is one manager replica.
type Replica struct {
	ID            uint64 `json:"id"`
	API           string `json:"api"`
	HeapInuseEnd  uint64 `json:"heap_inuse_bytes_end"`
	HeapInusePeak uint64 `json:"heap_inuse_bytes_peak"`
	HeapLiveEnd   uint64 `json:"heap_live_bytes_end"`
	Kills         int    `json:"kills"`
	// CPUSeconds is the CPU time the replica used during the run, over
	// all its processes (a kill loses what it used since the last sample).
	CPUSeconds float64 `json:"cpu_seconds"`
}

// Machine is where the run ran: its figures mean little without it, and
// the load average says how much else the machine was doing.
type Machine struct {
	CPUs         int    `json:"cpus"`
	MemoryBytes  uint64 `json:"memory_bytes,omitempty"`
	OSArch       string `json:"os_arch"`
	GoVersion    string `json:"go_version"`
	LoadAvgStart string `json:"load_average_start,omitempty"` // 1, 5 and 15 minutes
	LoadAvgEnd   string `json:"load_average_end,omitempty"`
}

// GroupLoad is one Raft group's proposals over the run, summed over the
// replicas that proposed them (a restarted replica's counters start
// again; the loadgen adds what each run of it counted).
type GroupLoad struct {
	Group     int     `json:"group"` // 0 is the cluster group
	Proposals uint64  `json:"proposals"`
	Commands  uint64  `json:"commands"`
	PerSecond float64 `json:"proposals_per_second"` // mean over the run
	PeakRate  float64 `json:"proposals_per_second_peak"`
	MeanBatch float64 `json:"mean_batch"` // commands per proposal
	// Elections is how far the group's Raft term rose during the run
	// (the highest any replica reported): every election, won or not.
	// Each leader kill costs the groups it led one or more; the rest are
	// spurious.
	Elections uint64 `json:"elections"`
}

// Invariant is one online check and its outcome.
type Invariant struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Checked     int64  `json:"checked"` // how many times it was evaluated
	Violations  int    `json:"violations"`
}

// Violation is one broken invariant with the objects involved.
type Violation struct {
	Invariant string   `json:"invariant"`
	AtSeconds float64  `json:"at_seconds"`
	Message   string   `json:"message"`
	Objects   []string `json:"objects,omitempty"`
}

// Series are per-second samples for charts; every slice has one entry per
// sample, at Seconds[i] since the start.
type Series struct {
	Seconds      []float64 `json:"seconds"`
	Phase        []string  `json:"phase"`
	TasksRunning []int     `json:"tasks_running"` // the loadgen's view from the event stream
	Transitions  []float64 `json:"transitions_per_second"`
	Connected    []int     `json:"agents_connected"`
	// BeatAge is, per sample, the longest any agent whose last heartbeat
	// succeeded had gone since it (seconds): past three heartbeat
	// periods the leader expires such agents although nothing failed,
	// which says the simulated fleet or the machine under it fell behind.
	BeatAge []float64 `json:"agent_beat_age_seconds"`
	// LagTasks is how many running tasks the loadgen's view (from the event
	// stream) differs by from the replicas' own count (/metrics).
	LagTasks []int64 `json:"lag_tasks"`
	// HeapInuse maps a replica ID (decimal) to its heap in use per sample
	// (0 when it could not be read).
	HeapInuse map[string][]uint64 `json:"heap_inuse_bytes"`
	// CPU maps a source ("replica 1", ..., "agents", "loadgen") to the
	// cores it used per sample: the average between the source's reading
	// at or after the sample and its reading before (a replica that
	// missed samples gets that average for each); 0 after its last
	// reading and for its first.
	CPU map[string][]float64 `json:"cpu_cores,omitempty"`
}

// Threshold is one --threshold and its outcome.
type Threshold struct {
	Expr  string  `json:"expr"`
	Value float64 `json:"value"`
	OK    bool    `json:"ok"`
}

// AgentCalls is one agent endpoint's calls over the run, summed over the
// replicas that answered them (a restarted replica's counters start again;
// the loadgen adds what each run of it counted).
type AgentCalls struct {
	Endpoint string `json:"endpoint"` // e.g. heartbeat, assignments, status, sync, session
	Total    uint64 `json:"total"`
	// PerAgentPerMinute is Total spread over the agents and the run.
	PerAgentPerMinute float64 `json:"per_agent_per_minute"`
}

// KillRecovery is how the fleet came back after one leader kill, in
// seconds after it: when a replica said it leads again (0: not seen) and
// when half, nine tenths and all of the agents timed had a heartbeat
// succeed at the new leader (by the agents' own clocks).
type KillRecovery struct {
	LedAgainSeconds float64 `json:"led_again_seconds"`
	Agents          int     `json:"agents"`
	HalfSeconds     float64 `json:"half_seconds"`
	P90Seconds      float64 `json:"p90_seconds"`
	AllSeconds      float64 `json:"all_seconds"`
}
