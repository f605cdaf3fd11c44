package loadgen

import (
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

// evalThresholds evaluates k6-style thresholds: NAME<VALUE, NAME<=VALUE,
// NAME>VALUE, NAME>=VALUE; VALUE is a number or a duration (5s, 200ms).
// An expression that cannot be read fails.
func evalThresholds(exprs []string, r *report.Report) []report.Threshold {
	var out []report.Threshold
	for _, e := range exprs {
		th := report.Threshold{Expr: e}
		i := strings.IndexAny(e, "<>")
		if i > 0 {
			name, op, val := strings.TrimSpace(e[:i]), e[i:i+1], e[i+1:]
			if strings.HasPrefix(val, "=") {
				op, val = op+"=", val[1:]
			}
			val = strings.TrimSpace(val)
			limit, err := strconv.ParseFloat(val, 64)
			if err != nil {
				if d, derr := time.ParseDuration(val); derr == nil {
					limit, err = d.Seconds(), nil
				}
			}
			v, ok := thresholdValue(name, r)
			if ok && err == nil {
				th.Value = v
				switch op {
				case "<":
					th.OK = v < limit
				case "<=":
					th.OK = v <= limit
				case ">":
					th.OK = v > limit
				case ">=":
					th.OK = v >= limit
				}
			}
		}
		out = append(out, th)
	}
	return out
}
