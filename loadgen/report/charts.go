package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/go-echarts/go-echarts/v2/render"
)

// chart is one chart of the HTML report: go-echarts renders its container
// and its script; the page inlines both (never go-echarts' CDN assets).
type chart struct {
	ID     string // DOM id and JS identifier suffix: [a-z_]
	Title  string
	Points int // data points drawn; a chart with none is left out
	render.ChartSnippet
}

// The charts of the report, in page order. Each names its ID so that the
// report check can find it.
var chartIDs = []string{"tasks_running", "throughput", "latency_percentiles", "latency_histogram", "heap", "cpu"}

// buildCharts returns the report's charts that have data.
func buildCharts(r *Report) []chart {
	var out []chart
	for _, c := range []chart{tasksChart(r), throughputChart(r), percentilesChart(r), histogramChart(r), heapChart(r), cpuChart(r)} {
		if c.Points > 0 {
			out = append(out, c)
		}
	}
	return out
}

// ChartsWithData is how many charts the HTML report of r draws: one per
// chart that has at least one data point.
func ChartsWithData(r *Report) int { return len(buildCharts(r)) }

// markScript hands each chart to the page's shoalMark (defined in the page
// before any chart), which sets data-rendered on the chart's section once
// echarts has finished drawing it.
const markScript = "shoalMark(%MY_ECHARTS%);"

func initOpts(id string) charts.GlobalOpts {
	return charts.WithInitializationOpts(opts.Initialization{ChartID: id, Width: "100%", Height: "340px"})
}

func commonOpts(id string) []charts.GlobalOpts {
	return []charts.GlobalOpts{
		initOpts(id),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "0"}),
		charts.WithGridOpts(opts.Grid{Left: "70", Right: "70", Top: "40", Bottom: "50"}),
	}
}

// seriesLen is the number of samples every series slice has.
func seriesLen(s Series) int {
	n := len(s.Seconds)
	for _, l := range []int{len(s.TasksRunning), len(s.Transitions), len(s.Connected)} {
		if l > 0 && l < n {
			n = l
		}
	}
	return n
}

// timeLine is a line chart over the run's time, its y axis in unit.
func timeLine(id, unit string) *charts.Line {
	line := charts.NewLine()
	line.SetGlobalOptions(append(commonOpts(id), timeAxis(),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: unit}))...)
	return line
}

func timeAxis() charts.GlobalOpts {
	return charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "s", Min: 0, Max: "dataMax"})
}

// phaseAreas shades the phases of the run behind a time series.
func phaseAreas(r *Report) charts.SeriesOpts {
	var areas [][]opts.MarkAreaData
	for i, ph := range r.Phases {
		if ph.Skipped || ph.Seconds <= 0 {
			continue
		}
		color := "rgba(120,140,180,0.08)"
		if i%2 == 1 {
			color = "rgba(120,140,180,0.18)"
		}
		areas = append(areas, []opts.MarkAreaData{
			{Name: safeLabel(ph.Name), XAxis: ph.StartSeconds, MarkAreaStyle: opts.MarkAreaStyle{ItemStyle: &opts.ItemStyle{Color: color}}},
			{XAxis: ph.StartSeconds + ph.Seconds},
		})
	}
	return charts.WithMarkAreaData(areas...)
}

// safeLabel keeps names from the JSON file to letters, digits, '_' and
// '-': go-echarts writes chart options into a <script> unescaped.
func safeLabel(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return -1
	}, s)
}

func xy[T int | int64 | uint64 | float64](sec []float64, vals []T, n int, scale float64) []opts.LineData {
	out := make([]opts.LineData, 0, n)
	for i := 0; i < n && i < len(vals); i++ {
		out = append(out, opts.LineData{Value: []float64{sec[i], float64(vals[i]) * scale}})
	}
	return out
}

func finish(c *charts.BaseConfiguration) {
	c.AddJSFuncStrs(opts.FuncOpts(markScript))
}

func tasksChart(r *Report) chart {
	const id = "tasks_running"
	s := r.Series
	n := seriesLen(s)
	line := timeLine(id, "tasks")
	line.ExtendYAxis(opts.YAxis{Type: "value", Name: "agents", Position: "right"})
	running := xy(s.Seconds, s.TasksRunning, n, 1)
	connected := xy(s.Seconds, s.Connected, n, 1)
	line.AddSeries("tasks running", running, phaseAreas(r),
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}),
		charts.WithAreaStyleOpts(opts.AreaStyle{Opacity: opts.Float(0.15)}))
	line.AddSeries("agents connected", connected,
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), YAxisIndex: 1, Step: "end"}))
	if r.Params.Tasks > 0 && len(running) > 0 {
		line.AddSeries("target (--tasks)", []opts.LineData{
			{Value: []float64{s.Seconds[0], float64(r.Params.Tasks)}},
			{Value: []float64{s.Seconds[n-1], float64(r.Params.Tasks)}},
		}, charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}),
			charts.WithLineStyleOpts(opts.LineStyle{Type: "dashed", Width: 1}))
	}
	points := len(running) + len(connected)
	if r.Params.Tasks > 0 && len(running) > 0 {
		points += 2 // the target line
	}
	finish(&line.BaseConfiguration)
	return chart{ID: id, Title: "Tasks running and agents connected over time (phases shaded)",
		Points: points, ChartSnippet: line.RenderSnippet()}
}

func throughputChart(r *Report) chart {
	const id = "throughput"
	s := r.Series
	n := seriesLen(s)
	line := timeLine(id, "transitions/s")
	tr := xy(s.Seconds, s.Transitions, n, 1)
	line.AddSeries("transitions/s", tr, phaseAreas(r),
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)}))
	points := len(tr)
	if len(s.LagTasks) >= n && n > 0 {
		line.ExtendYAxis(opts.YAxis{Type: "value", Name: "lag (tasks)", Position: "right"})
		lag := xy(s.Seconds, s.LagTasks, n, 1)
		line.AddSeries("loadgen lag (tasks)", lag,
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), YAxisIndex: 1}))
		points += len(lag)
	}
	finish(&line.BaseConfiguration)
	return chart{ID: id, Title: "Throughput: task state transitions per second",
		Points: points, ChartSnippet: line.RenderSnippet()}
}

func percentilesChart(r *Report) chart {
	const id = "latency_percentiles"
	bar := charts.NewBar()
	bar.SetGlobalOptions(append(commonOpts(id),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "ms (log scale)", Min: 1}))...)
	var names []string
	cols := map[string][]opts.BarData{}
	for _, l := range r.Latencies {
		if l.Count == 0 {
			continue
		}
		names = append(names, safeLabel(l.Name))
		for _, p := range []struct {
			k string
			v float64
		}{{"p50", l.P50}, {"p90", l.P90}, {"p99", l.P99}, {"max", l.Max}} {
			cols[p.k] = append(cols[p.k], opts.BarData{Value: p.v})
		}
	}
	bar.SetXAxis(names)
	points := 0
	for _, k := range []string{"p50", "p90", "p99", "max"} {
		bar.AddSeries(k, cols[k])
		points += len(cols[k])
	}
	finish(&bar.BaseConfiguration)
	title := "Latency percentiles (HdrHistogram)"
	if len(r.Latencies) > 0 && r.Latencies[0].Source != "" {
		title += ", from a " + r.Latencies[0].Source
	}
	return chart{ID: id, Title: title,
		Points: points, ChartSnippet: bar.RenderSnippet()}
}

// histogramChart draws each latency distribution re-binned on 1-2-5 bounds
// (1 ms, 2 ms, 5 ms, 10 ms, ...), as the share of its samples, so that
// distributions of different sizes compare and HdrHistogram's fine buckets
// stay readable.
func histogramChart(r *Report) chart {
	const id = "latency_histogram"
	var bounds []float64 // 1-2-5 up to the largest bucket
	maxMs := 0.0
	for _, l := range r.Latencies {
		for _, b := range l.Buckets {
			maxMs = max(maxMs, b.UpToMs)
		}
	}
	for decade := 1.0; len(bounds) == 0 || bounds[len(bounds)-1] < maxMs; decade *= 10 {
		bounds = append(bounds, decade, 2*decade, 5*decade)
	}
	for len(bounds) > 1 && bounds[len(bounds)-2] >= maxMs {
		bounds = bounds[:len(bounds)-1]
	}
	labels := make([]string, len(bounds))
	for i, b := range bounds {
		labels[i] = "≤" + fmtMs(b)
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(append(commonOpts(id),
		charts.WithXAxisOpts(opts.XAxis{Name: "latency"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "% of tasks"}))...)
	bar.SetXAxis(labels)
	points := 0
	for _, l := range r.Latencies {
		var total int64
		counts := make([]int64, len(bounds))
		for _, b := range l.Buckets {
			i, _ := slices.BinarySearch(bounds, b.UpToMs)
			counts[min(i, len(bounds)-1)] += b.Count
			total += b.Count
		}
		if total == 0 {
			continue
		}
		data := make([]opts.BarData, len(bounds))
		for i, c := range counts {
			data[i] = opts.BarData{Value: roundTo(100*float64(c)/float64(total), 2)}
		}
		bar.AddSeries(safeLabel(l.Name), data)
		points += len(data)
	}
	finish(&bar.BaseConfiguration)
	return chart{ID: id, Title: "Latency distribution (share of tasks per bucket)",
		Points: points, ChartSnippet: bar.RenderSnippet()}
}

func heapChart(r *Report) chart {
	const id = "heap"
	s := r.Series
	line := timeLine(id, "MiB")
	var ids []uint64
	for k := range s.HeapInuse {
		if id, err := strconv.ParseUint(k, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	points := 0
	for i, rid := range ids {
		vals := s.HeapInuse[strconv.FormatUint(rid, 10)]
		var data []opts.LineData
		for j := 0; j < len(vals) && j < len(s.Seconds); j++ {
			if vals[j] == 0 { // not read: a gap, not a drop to zero
				data = append(data, opts.LineData{Value: []any{s.Seconds[j], "-"}})
				continue
			}
			data = append(data, opts.LineData{Value: []float64{s.Seconds[j], roundTo(float64(vals[j])/(1<<20), 1)}})
			points++
		}
		so := []charts.SeriesOpts{charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false)})}
		if i == 0 {
			so = append(so, phaseAreas(r))
		}
		line.AddSeries(fmt.Sprintf("replica %d", rid), data, so...)
	}
	finish(&line.BaseConfiguration)
	return chart{ID: id, Title: "Heap in use per manager replica (from /metrics; gaps: not readable, e.g. killed)",
		Points: points, ChartSnippet: line.RenderSnippet()}
}

func roundTo(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return f
}

func fmtMs(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'g', 3, 64) + "s"
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + "ms"
}
