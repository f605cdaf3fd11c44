package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes r as a plain-text summary.
func WriteTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := r.Params
	fmt.Fprintf(tw, "shoal loadgen\tseed %d, %d agents, %d tasks, %d services, %d networks, phases %s\n",
		r.Seed, p.Agents, p.Tasks, p.Services, p.Networks, strings.Join(p.Phases, ","))
	if m := r.Machine; m.CPUs > 0 {
		fmt.Fprintf(tw, "machine	%d CPUs, %.0f GiB, %s, %s; load average %s at the start, %s at the end\n",
			m.CPUs, float64(m.MemoryBytes)/(1<<30), m.OSArch, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd)
	}
	fmt.Fprintf(tw, "phase\tstart\tduration\tcores busy: replicas + agents + loadgen\tCPU µs per task: replicas + agents + loadgen\tnote\n")
	for _, ph := range r.Phases {
		if ph.Skipped {
			fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\toff\n", ph.Name)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%.1fs\t%.1fs\t%s\t%s\t%s\n", ph.Name, ph.StartSeconds, ph.Seconds, coresText(ph, r.Machine.CPUs), perTaskText(ph, p.Tasks), ph.Note)
	}
	conv := "did not converge"
	switch {
	case r.Converged:
		conv = fmt.Sprintf("%.2fs", r.ConvergeSeconds)
	case !r.quiesceRan():
		conv = "not measured (the quiesce phase did not run)"
	}
	fmt.Fprintf(tw, "tasks running\t%d / %d\n", r.TasksRunning, p.Tasks)
	fmt.Fprintf(tw, "converge\t%s\n", conv)
	fmt.Fprintf(tw, "heap per task\t%.0f B in use, %.0f B live at the last collection (max over replicas)\n",
		r.HeapBytesPerTask, r.HeapLiveBytesPerTask)
	for _, rep := range r.Replicas {
		fmt.Fprintf(tw, "  replica %d\theap end %.1f MiB (%.1f MiB live), peak %.1f MiB, killed %d×, CPU %.1f s\n", rep.ID,
			float64(rep.HeapInuseEnd)/(1<<20), float64(rep.HeapLiveEnd)/(1<<20), float64(rep.HeapInusePeak)/(1<<20), rep.Kills, rep.CPUSeconds)
	}
	fmt.Fprintf(tw, "transitions/s\tmean %.0f, peak %.0f (%d transitions, %d events)\n",
		r.Transitions.Mean, r.Transitions.Peak, r.Counts.Transitions, r.Counts.Events)
	if len(r.Groups) > 0 {
		fmt.Fprintf(tw, "proposals per group\tper s\tpeak/s\tbatch\ttotal\telections\n")
		for _, g := range r.Groups {
			fmt.Fprintf(tw, "  group %d\t%.0f\t%.0f\t%.1f\t%d\t%d\n", g.Group, g.PerSecond, g.PeakRate, g.MeanBatch, g.Proposals, g.Elections)
		}
	}
	if len(r.AgentCalls) > 0 {
		fmt.Fprintf(tw, "agent calls\t%s per agent per minute\n", agentCallsText(r.AgentCalls))
	}
	fmt.Fprintf(tw, "latency (ms)\tcount\tp50\tp90\tp99\tmax\n")
	source := ""
	for _, l := range r.Latencies {
		fmt.Fprintf(tw, "  %s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\n", l.Name, l.Count, l.P50, l.P90, l.P99, l.Max)
		source = l.Source
	}
	if source != "" {
		fmt.Fprintf(tw, "  from a %s\n", source)
	}
	c := r.Counts
	fmt.Fprintf(tw, "operations\t%d services, %d scales, %d updates, %d removes, %d recreates, %d crashes, %d API errors\n",
		c.ServicesCreated, c.Scales, c.Updates, c.Removes, c.Recreates, c.Crashes, c.APIErrors)
	for _, e := range c.APIErrorList {
		fmt.Fprintf(tw, "  API error\t%s\n", e)
	}
	if c.Interrupted > 0 {
		fmt.Fprintf(tw, "  cut short\t%s under way when their phase ended (not errors)\n", calls(c.Interrupted))
	}
	fmt.Fprintf(tw, "faults\t%d disconnects, %d vanishes, %d leader kills; stream: %d reconnects, %d resyncs\n",
		c.Disconnects, c.Vanishes, c.LeaderKills, c.StreamReconnects, c.StreamResyncs)
	fmt.Fprintf(tw, "  agent heartbeats\tat most %.1fs apart (among agents whose last one succeeded)\n", c.BeatAgeMax)
	if len(c.LeaderKillRecovery) > 0 {
		var s []string
		for _, v := range c.LeaderKillRecovery {
			s = append(s, fmt.Sprintf("%.2fs", v))
		}
		fmt.Fprintf(tw, "  agents at new leader\t%s after each leader kill\n", strings.Join(s, ", "))
		for i, k := range c.LeaderKillDetail {
			fmt.Fprintf(tw, "    kill %d\tled again %.2fs; agents back: half %.2fs, 90%% %.2fs, all %.2fs\n",
				i+1, k.LedAgainSeconds, k.HalfSeconds, k.P90Seconds, k.AllSeconds)
		}
	}
	writeFleet(tw, r.Fleet)
	fmt.Fprintf(tw, "invariant\tchecked\tviolations\n")
	for _, inv := range r.Invariants {
		mark := "✓"
		if inv.Violations > 0 {
			mark = "✗"
		}
		fmt.Fprintf(tw, "  %s %s\t%d\t%d\n", mark, inv.Name, inv.Checked, inv.Violations)
	}
	for _, th := range r.Thresholds {
		mark := "✓"
		if !th.OK {
			mark = "✗"
		}
		fmt.Fprintf(tw, "threshold\t%s %s (value %.3g)\n", mark, th.Expr, th.Value)
	}
	fmt.Fprintf(tw, "violations\t%d\n", r.Violations)
	return tw.Flush()
}

// writeFleet writes the fleet workers' lines (none without workers).
func writeFleet(w io.Writer, f *Fleet) {
	if f == nil {
		return
	}
	fmt.Fprintf(w, "fleet workers\t%d workers (%d lost), %d agents in local processes; latencies on %s; observations merged %s\n",
		len(f.Workers), f.WorkersLost, f.LocalAgents, f.LatencyClock, f.MergeOrder)
	for _, wk := range f.Workers {
		lost := ""
		if wk.Lost {
			lost = "; LOST during the run"
		}
		fmt.Fprintf(w, "  worker %d\t%s (%s): %d agents from %d, CPU %.1f s, clock offset %+.3f ms ± %.3f ms%s\n",
			wk.ID, wk.Host, wk.Address, wk.Agents, wk.FirstAgent, wk.CPUSeconds, wk.ClockOffsetMs, wk.ClockErrorMs, lost)
	}
}

// coresText is a phase's average cores busy per CPU group, e.g. "1.21 +
// 0.55 + 0.20 = 1.96 of 2"; "-" when no CPU was read.
func coresText(ph Phase, cpus int) string {
	sum, ok := ph.CoresBusy()
	if !ok {
		return "-"
	}
	var parts []string
	for _, g := range CPUGroups {
		parts = append(parts, fmt.Sprintf("%.2f", ph.CPUSeconds[g]/ph.Seconds))
	}
	of := ""
	if cpus > 0 {
		of = fmt.Sprintf(" of %d", cpus)
	}
	return fmt.Sprintf("%s = %.2f%s", strings.Join(parts, " + "), sum, of)
}

// perTaskText is a phase's CPU microseconds per task of the run per CPU
// group, e.g. "142 + 139 + 22 = 303"; "-" when no CPU was read.
func perTaskText(ph Phase, tasks int) string {
	if len(ph.CPUSeconds) == 0 {
		return "-"
	}
	var parts []string
	sum := 0.0
	for _, g := range CPUGroups {
		v, _ := ph.CPUPerTask(g, tasks)
		sum += v
		parts = append(parts, fmt.Sprintf("%.1f", v))
	}
	return fmt.Sprintf("%s = %.1f", strings.Join(parts, " + "), sum)
}
