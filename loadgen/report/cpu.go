package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// CPUGroup names the group a CPU source belongs to: "replicas" for every
// "replica N", else the source itself ("agents", "loadgen").
func CPUGroup(source string) string {
	if strings.HasPrefix(source, "replica ") {
		return "replicas"
	}
	return source
}

// PhaseCPU adds up, per CPU group, the CPU seconds used during phase ph
// (from its start to its end; samples go on being labelled with a phase
// after it ended, while the report is built): each sample's cores over
// the part of its interval, since the sample before, that lies in the
// phase. The first sample has no interval and counts nothing.
func PhaseCPU(s Series, ph Phase) map[string]float64 {
	from, to := ph.StartSeconds, ph.StartSeconds+ph.Seconds
	out := map[string]float64{}
	for src, cores := range s.CPU {
		g := CPUGroup(src)
		for i := 1; i < len(s.Seconds) && i < len(cores); i++ {
			if in := min(s.Seconds[i], to) - max(s.Seconds[i-1], from); in > 0 {
				out[g] += cores[i] * in
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	for g, v := range out {
		out[g] = math.Round(v*1000) / 1000
	}
	return out
}

// cpuSources are the CPU series' sources in drawing order (bottom first):
// the replicas by ID, then the agents and the loadgen. Keys of another
// form are left out (the chart's names go into a script unescaped).
func cpuSources(s Series) []string {
	var ids []uint64
	for k := range s.CPU {
		if n, ok := strings.CutPrefix(k, "replica "); ok {
			if id, err := strconv.ParseUint(n, 10, 64); err == nil {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		out = append(out, "replica "+strconv.FormatUint(id, 10))
	}
	for _, k := range []string{"agents", "loadgen"} {
		if _, ok := s.CPU[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func cpuChart(r *Report) chart {
	const id = "cpu"
	s := r.Series
	line := timeLine(id, "cores")
	points := 0
	var total []float64
	for i, src := range cpuSources(s) {
		vals := s.CPU[src]
		n := min(len(vals), len(s.Seconds))
		total = append(total, make([]float64, max(0, n-len(total)))...)
		for j := range n {
			total[j] += vals[j]
		}
		data := xy(s.Seconds, vals, n, 1)
		so := []charts.SeriesOpts{charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)})}
		if i == 0 {
			so = append(so, phaseAreas(r))
		}
		line.AddSeries(src, data, so...)
		points += len(data)
	}
	if points > 0 {
		data := xy(s.Seconds, total, len(total), 1)
		line.AddSeries("all of them", data, charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}),
			charts.WithLineStyleOpts(opts.LineStyle{Width: 3, Color: "#333"}))
		points += len(data)
	}
	finish(&line.BaseConfiguration)
	title := "CPU: cores busy per process and all of them (replicas from /metrics, agents' processes and the loadgen from the kernel)"
	if r.Machine.CPUs > 0 {
		title += fmt.Sprintf("; the machine has %d", r.Machine.CPUs)
	}
	return chart{ID: id, Title: title, Points: points, ChartSnippet: line.RenderSnippet()}
}

// PerTask is cpu (CPU seconds per group) in microseconds per task of a
// run of tasks tasks, rounded to a tenth.
func PerTask(cpu map[string]float64, tasks int) map[string]float64 {
	if len(cpu) == 0 {
		return nil
	}
	out := make(map[string]float64, len(cpu))
	for g, v := range cpu {
		out[g] = math.Round(v/float64(max(tasks, 1))*1e7) / 10
	}
	return out
}
