package loadgen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/loadgen/report"
)

// thresholdValue reads a named figure of the report (seconds for
// durations, bytes for heap).
func thresholdValue(name string, r *report.Report) (float64, bool) {
	lat := func(which string, q func(l report.Latency) float64) (float64, bool) {
		for _, l := range r.Latencies {
			if l.Name == which {
				return q(l) / 1000, true
			}
		}
		return 0, false
	}
	switch name {
	case "converge":
		if !r.Converged {
			return 1e18, true
		}
		return r.ConvergeSeconds, true
	case "violations":
		return float64(r.Violations), true
	case "tasks_running":
		return float64(r.TasksRunning), true
	case "heap_per_task":
		return r.HeapBytesPerTask, true
	case "running_p50":
		return lat("create_to_running", func(l report.Latency) float64 { return l.P50 })
	case "running_p90":
		return lat("create_to_running", func(l report.Latency) float64 { return l.P90 })
	case "running_p99":
		return lat("create_to_running", func(l report.Latency) float64 { return l.P99 })
	case "running_max":
		return lat("create_to_running", func(l report.Latency) float64 { return l.Max })
	case "assigned_p99":
		return lat("create_to_assigned", func(l report.Latency) float64 { return l.P99 })
	case "ramp":
		for _, p := range r.Phases {
			if p.Name == "ramp" {
				return p.Seconds, true
			}
		}
	}
	return 0, false
}

// thresholdNames are the figures a threshold can name.
var thresholdNames = []string{"converge", "violations", "tasks_running", "heap_per_task", "running_p50",
	"running_p90", "running_p99", "running_max", "assigned_p99", "ramp"}

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
	if !slices.Contains(thresholdNames, th.name) {
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
