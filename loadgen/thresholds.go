package loadgen

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/loadgen/report"
)

// figures are what a threshold can name, each read from the report
// (seconds for durations, bytes for heap); ok=false where the run did not
// measure it.
var figures = map[string]func(r *report.Report) (float64, bool){
	"converge": func(r *report.Report) (float64, bool) {
		if !r.Converged {
			return 1e18, true
		}
		return r.ConvergeSeconds, true
	},
	"violations":    func(r *report.Report) (float64, bool) { return float64(r.Violations), true },
	"tasks_running": func(r *report.Report) (float64, bool) { return float64(r.TasksRunning), true },
	"heap_per_task": func(r *report.Report) (float64, bool) { return r.HeapBytesPerTask, true },
	"running_p50":   figureLatency("create_to_running", func(l report.Latency) float64 { return l.P50 }),
	"running_p90":   figureLatency("create_to_running", func(l report.Latency) float64 { return l.P90 }),
	"running_p99":   figureLatency("create_to_running", func(l report.Latency) float64 { return l.P99 }),
	"running_max":   figureLatency("create_to_running", func(l report.Latency) float64 { return l.Max }),
	"assigned_p99":  figureLatency("create_to_assigned", func(l report.Latency) float64 { return l.P99 }),
	"ramp": func(r *report.Report) (float64, bool) {
		for _, p := range r.Phases {
			if p.Name == "ramp" {
				return p.Seconds, true
			}
		}
		return 0, false
	},
}

// figureLatency reads quantile q of the latency named which, in seconds.
func figureLatency(which string, q func(l report.Latency) float64) func(r *report.Report) (float64, bool) {
	return func(r *report.Report) (float64, bool) {
		for _, l := range r.Latencies {
			if l.Name == which {
				return q(l) / 1000, true
			}
		}
		return 0, false
	}
}

// thresholdNames are the figures' names, sorted (for error messages).
var thresholdNames = slices.Sorted(maps.Keys(figures))

// thresholdValue reads the figure called name from the report.
func thresholdValue(name string, r *report.Report) (float64, bool) {
	if f, ok := figures[name]; ok {
		return f(r)
	}
	return 0, false
}

// threshold is one parsed expression: NAME OP LIMIT.
type threshold struct {
	name, op string
	limit    float64
}

// parseThreshold reads a k6-style threshold: NAME<VALUE, NAME<=VALUE,
// NAME>VALUE or NAME>=VALUE; VALUE is a number or a duration (5s, 200ms;
// durations compare in seconds).
func parseThreshold(e string) (threshold, error) {
	i := strings.IndexAny(e, "<>")
	if i <= 0 {
		return threshold{}, fmt.Errorf("threshold %q: want NAME<VALUE, NAME<=VALUE, NAME>VALUE or NAME>=VALUE, e.g. 'converge<20s'", e)
	}
	th := threshold{name: strings.TrimSpace(e[:i]), op: e[i : i+1]}
	val := e[i+1:]
	if strings.HasPrefix(val, "=") {
		th.op, val = th.op+"=", val[1:]
	}
	if _, ok := figures[th.name]; !ok {
		return threshold{}, fmt.Errorf("threshold %q: no figure named %q (figures: %s)", e, th.name, strings.Join(thresholdNames, ", "))
	}
	val = strings.TrimSpace(val)
	limit, err := strconv.ParseFloat(val, 64)
	if err != nil {
		d, derr := time.ParseDuration(val)
		if derr != nil {
			return threshold{}, fmt.Errorf("threshold %q: %q is neither a number nor a duration (5s, 200ms)", e, val)
		}
		limit = d.Seconds()
	}
	th.limit = limit
	return th, nil
}

// CheckThresholds reports the first expression evalThresholds could not
// read, so that a run is not made only to fail on a typo at its end.
func CheckThresholds(exprs []string) error {
	for _, e := range exprs {
		if _, err := parseThreshold(e); err != nil {
			return err
		}
	}
	return nil
}

// evalThresholds evaluates k6-style thresholds (parseThreshold) against
// the report. An expression that cannot be read, or a figure the report
// does not have, fails.
func evalThresholds(exprs []string, r *report.Report) []report.Threshold {
	var out []report.Threshold
	for _, e := range exprs {
		out = append(out, evalThreshold(e, r))
	}
	return out
}

func evalThreshold(e string, r *report.Report) report.Threshold {
	th := report.Threshold{Expr: e}
	p, err := parseThreshold(e)
	if err != nil {
		return th
	}
	v, ok := thresholdValue(p.name, r)
	if !ok {
		return th
	}
	th.Value = v
	switch p.op {
	case "<":
		th.OK = v < p.limit
	case "<=":
		th.OK = v <= p.limit
	case ">":
		th.OK = v > p.limit
	case ">=":
		th.OK = v >= p.limit
	}
	return th
}
