// Command compare sets a loadgen run's JSON report (shoal loadgen --json)
// beside a baseline: one row per metric with both values, their ratio and
// whether the run is better, within the noise band, or worse. It exits 1
// when the run broke an invariant or did not converge, never for speed:
// these machines are shared and noisy, so a slower run is flagged, not
// failed.
//
//	go run ./perf/compare BASELINE.json RUN.json
//
// Either side may name several runs, comma-separated
// (A1.json,A2.json,A3.json): each figure is then the median of that
// side's runs, shown with their range, and the ratio is of the medians.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
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
		fmt.Fprintln(os.Stderr, "usage: compare BASELINE.json[,MORE.json...] RUN.json[,MORE.json...]")
		os.Exit(2)
	}
	base, err := loadAll(os.Args[1])
	if err == nil {
		var runs []*report.Report
		if runs, err = loadAll(os.Args[2]); err == nil {
			os.Exit(compareSets(os.Stdout, base, runs))
		}
	}
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(2)
}

// loadAll reads a comma-separated list of reports.
func loadAll(paths string) ([]*report.Report, error) {
	var out []*report.Report
	for _, p := range strings.Split(paths, ",") {
		if p == "" {
			continue
		}
		r, err := load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no report named in %q", paths)
	}
	return out, nil
}

// summary is one side's figure: the median of its runs and their range.
type summary struct {
	median, lo, hi float64
	n              int
}

func summarize(m metric, rs []*report.Report) (summary, bool) {
	var vs []float64
	for _, r := range rs {
		if v, ok := m.get(r); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return summary{}, false
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return summary{median: med, lo: vs[0], hi: vs[len(vs)-1], n: len(vs)}, true
}

func (s summary) show(ok bool, unit string) string {
	if !ok {
		return "—"
	}
	if s.n < 2 {
		return show(s.median, true, unit)
	}
	return fmt.Sprintf("%s (%s–%s)", show(s.median, true, unit), show(s.lo, true, ""), show(s.hi, true, ""))
}

// compare writes the table for one baseline run and one run and returns
// the exit status.
func compare(w io.Writer, base, run *report.Report) int {
	return compareSets(w, []*report.Report{base}, []*report.Report{run})
}

// compareSets writes the table of the medians of the baseline's runs and
// of the runs, and returns the exit status: 1 when any run broke an
// invariant or did not end with every task running.
func compareSets(w io.Writer, bases, runs []*report.Report) int {
	b0 := bases[0]
	bp := b0.Params
	for _, r := range append(bases[1:], runs...) {
		rp := r.Params
		if bp.Agents != rp.Agents || bp.Tasks != rp.Tasks || bp.Services != rp.Services || b0.Seed != r.Seed {
			fmt.Fprintf(w, "note: the runs differ: baseline %d agents, %d tasks, %d services, seed %d; a run has %d, %d, %d, seed %d\n",
				bp.Agents, bp.Tasks, bp.Services, b0.Seed, rp.Agents, rp.Tasks, rp.Services, r.Seed)
			break
		}
	}
	for _, side := range []struct {
		name string
		rs   []*report.Report
	}{{"baseline", bases}, {"this run", runs}} {
		for i, r := range side.rs {
			name := side.name
			if len(side.rs) > 1 {
				name = fmt.Sprintf("%s %d", side.name, i+1)
			}
			mc := r.Machine
			if mc.CPUs == 0 {
				fmt.Fprintf(w, "%s: %s, machine not recorded\n", name, r.StartedAt)
				continue
			}
			busy := ""
			if c, ok := rampCores(r); ok {
				busy = fmt.Sprintf("; the ramp kept %.2f of them busy", c)
			}
			fmt.Fprintf(w, "%s: %s, %d CPUs, load average %s → %s%s\n", name, r.StartedAt, mc.CPUs, mc.LoadAvgStart, mc.LoadAvgEnd, busy)
		}
	}
	if len(bases) > 1 || len(runs) > 1 {
		fmt.Fprintf(w, "figures are medians (range) of %d baseline runs and %d runs; the ratio is of the medians\n", len(bases), len(runs))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "metric\tbaseline\tthis run\tratio\t\n")
	for _, m := range append(metrics, cpuMetrics()...) {
		sb, okB := summarize(m, bases)
		sv, okV := summarize(m, runs)
		b, v := sb.median, sv.median
		switch {
		case !okB && !okV:
			continue
		case !okB || !okV || b == 0:
			fmt.Fprintf(tw, "%s\t%s\t%s\t—\t\n", m.name, sb.show(okB, m.unit), sv.show(okV, m.unit))
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t×%.2f\t%s\n", m.name, sb.show(true, m.unit), sv.show(true, m.unit), ratio, verdict)
	}
	counts := func(rs []*report.Report, f func(*report.Report) int) string {
		var parts []string
		for _, r := range rs {
			parts = append(parts, fmt.Sprint(f(r)))
		}
		return strings.Join(parts, ",")
	}
	running := func(r *report.Report) int { return r.TasksRunning }
	violations := func(r *report.Report) int { return r.Violations }
	fmt.Fprintf(tw, "tasks running\t%s\t%s\t\t\n", counts(bases, running), counts(runs, running))
	fmt.Fprintf(tw, "violations\t%s\t%s\t\t\n", counts(bases, violations), counts(runs, violations))
	_ = tw.Flush()
	fmt.Fprintf(w, "(~: within ±%.0f%%, the noise of a shared machine)\n", Noise*100)
	status := 0
	for i, r := range runs {
		if r.Violations > 0 || r.TasksRunning != r.Params.Tasks {
			fmt.Fprintf(w, "FAIL: run %d: %d violations, %d of %d tasks running at the end\n", i+1, r.Violations, r.TasksRunning, r.Params.Tasks)
			status = 1
		}
	}
	return status
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
