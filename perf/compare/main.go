// Command compare sets a loadgen run's JSON report (shoal loadgen --json)
// beside a baseline: one row per metric with both values, their ratio and
// whether the run is better, within the noise band, or worse. It exits 1
// when the run broke an invariant or did not converge, never for speed:
// these machines are shared and noisy, so a slower run is flagged, not
// failed.
//
//	go run ./perf/compare BASELINE.json RUN.json
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"shoal/loadgen/report"
)

// metric is one compared figure; lower says whether less is better.
type metric struct {
	name  string
	unit  string
	lower bool
	get   func(*report.Report) (float64, bool)
}

func phase(name string) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		p, ran := r.PhaseRan(name)
		return p.Seconds, ran
	}
}

func latency(name string, p99 bool) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		for _, l := range r.Latencies {
			if l.Name == name && l.Count > 0 {
				if p99 {
					return l.P99, true
				}
				return l.P50, true
			}
		}
		return 0, false
	}
}

func proposals(batch bool) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		var n, cmds, rate float64
		for _, g := range r.Groups {
			n += float64(g.Proposals)
			cmds += float64(g.Commands)
			rate += g.PerSecond
		}
		if n == 0 {
			return 0, false
		}
		if batch {
			return cmds / n, true
		}
		return rate, true
	}
}

// phaseCPU is the CPU group's (replicas, agents, loadgen) CPU time in
// the phase per task, in microseconds: unlike the phase's wall time it
// does not grow because other work shared the machine (only somewhat,
// through caches). A baseline written before the report recorded it per
// task has it worked out from the phase's CPU seconds.
func phaseCPU(name, group string) func(*report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		p, ran := r.PhaseRan(name)
		if !ran {
			return 0, false
		}
		return p.CPUPerTask(group, r.Params.Tasks)
	}
}

// rampCores is the cores the run's processes kept busy, on average, in
// its ramp: near the machine's count, the ramp's time was bound by it.
func rampCores(r *report.Report) (float64, bool) {
	p, _ := r.PhaseRan("ramp")
	return p.CoresBusy()
}

var metrics = []metric{
	{"ramp (creates to all running)", "s", true, phase("ramp")},
	{"converge after faults", "s", true, func(r *report.Report) (float64, bool) { return r.ConvergeSeconds, r.Converged }},
	{"create→running p50", "ms", true, latency("create_to_running", false)},
	{"create→running p99", "ms", true, latency("create_to_running", true)},
	{"transitions/s mean", "/s", false, func(r *report.Report) (float64, bool) { return r.Transitions.Mean, r.Transitions.Mean > 0 }},
	{"transitions/s peak", "/s", false, func(r *report.Report) (float64, bool) { return r.Transitions.Peak, r.Transitions.Peak > 0 }},
	{"proposals/s, all groups (fewer: bigger batches)", "/s", true, proposals(false)},
	{"commands per proposal", "", false, proposals(true)},
	{"heap per task (max replica)", "B", true, func(r *report.Report) (float64, bool) { return r.HeapBytesPerTask, r.HeapBytesPerTask > 0 }},
}

var whose = map[string]string{"replicas": "replicas'", "agents": "agents'", "loadgen": "loadgen's"}

// cpuMetrics are each phase's CPU per task, per group: the ramp's first.
func cpuMetrics() []metric {
	var out []metric
	for _, ph := range []string{"ramp", "churn", "faults", "quiesce"} {
		for _, g := range report.CPUGroups {
			out = append(out, metric{fmt.Sprintf("%s CPU in the %s, per task", whose[g], ph), "µs", true, phaseCPU(ph, g)})
		}
	}
	return out
}

// Noise is the band within which a ratio counts as unchanged.
const Noise = 0.15

func load(path string) (*report.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a loadgen report: %w", path, err)
	}
	return &r, nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: compare BASELINE.json RUN.json")
		os.Exit(2)
	}
	base, err := load(os.Args[1])
	if err == nil {
		var run *report.Report
		if run, err = load(os.Args[2]); err == nil {
			os.Exit(compare(os.Stdout, base, run))
		}
	}
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(2)
}

// compare writes the table and returns the exit status.
func compare(w io.Writer, base, run *report.Report) int {
	bp, rp := base.Params, run.Params
	if bp.Agents != rp.Agents || bp.Tasks != rp.Tasks || bp.Services != rp.Services || base.Seed != run.Seed {
		fmt.Fprintf(w, "note: the runs differ: baseline %d agents, %d tasks, %d services, seed %d; this run %d, %d, %d, seed %d\n",
			bp.Agents, bp.Tasks, bp.Services, base.Seed, rp.Agents, rp.Tasks, rp.Services, run.Seed)
	}
	for _, m := range []struct {
		name string
		r    *report.Report
	}{{"baseline", base}, {"this run", run}} {
		mc := m.r.Machine
		if mc.CPUs == 0 {
			fmt.Fprintf(w, "%s: %s, machine not recorded\n", m.name, m.r.StartedAt)
			continue
		}
		busy := ""
		if c, ok := rampCores(m.r); ok {
			busy = fmt.Sprintf("; the ramp kept %.2f of them busy", c)
		}
		fmt.Fprintf(w, "%s: %s, %d CPUs, load average %s → %s%s\n", m.name, m.r.StartedAt, mc.CPUs, mc.LoadAvgStart, mc.LoadAvgEnd, busy)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "metric\tbaseline\tthis run\tratio\t\n")
	for _, m := range append(metrics, cpuMetrics()...) {
		b, okB := m.get(base)
		v, okV := m.get(run)
		switch {
		case !okB && !okV:
			continue
		case !okB || !okV || b == 0:
			fmt.Fprintf(tw, "%s\t%s\t%s\t—\t\n", m.name, show(b, okB, m.unit), show(v, okV, m.unit))
			continue
		}
		ratio := v / b
		verdict := "~"
		better := ratio < 1
		if !m.lower {
			better = ratio > 1
		}
		if ratio > 1+Noise || ratio < 1-Noise {
			verdict = "worse"
			if better {
				verdict = "better"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t×%.2f\t%s\n", m.name, show(b, true, m.unit), show(v, true, m.unit), ratio, verdict)
	}
	fmt.Fprintf(tw, "tasks running\t%d\t%d\t\t\n", base.TasksRunning, run.TasksRunning)
	fmt.Fprintf(tw, "violations\t%d\t%d\t\t\n", base.Violations, run.Violations)
	_ = tw.Flush()
	fmt.Fprintf(w, "(~: within ±%.0f%%, the noise of a shared machine)\n", Noise*100)
	if run.Violations > 0 || run.TasksRunning != rp.Tasks {
		fmt.Fprintf(w, "FAIL: %d violations, %d of %d tasks running at the end\n", run.Violations, run.TasksRunning, rp.Tasks)
		return 1
	}
	return 0
}

func show(v float64, ok bool, unit string) string {
	if !ok {
		return "—"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f%s", v, unit)
	}
	return fmt.Sprintf("%.3g%s", v, unit)
}
