package loadgen

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"shoal/api/client"
	"shoal/loadgen/check"
	"shoal/loadgen/report"
)

// stats measures latencies and transitions from the event stream. Times
// come from the tasks' Since (the manager's clock, on the same machine).
// Each task's timing is kept in the checker's view of it
// (check.Checker.OnTiming: one table per task, not two).
type stats struct {
	mu struct {
		sync.Mutex
		c2a, a2r    *hdrhistogram.Histogram
		c2r         *hdrhistogram.Histogram
		transitions int64
		seen        int64
		// sampled replaces the stream's latencies (rampLatencies).
		sampled []report.Latency
	}
}

// newStats returns the statistics of a run; tasks (about how many it has)
// sizes nothing now that each task's timing is the checker's to keep.
func newStats(int) *stats {
	s := &stats{}
	s.mu.c2a = hdrhistogram.New(1, 3_600_000, 3)
	s.mu.a2r = hdrhistogram.New(1, 3_600_000, 3)
	s.mu.c2r = hdrhistogram.New(1, 3_600_000, 3)
	return s
}

// event counts the stream's transitions.
func (s *stats) event(ev client.Event) {
	if ev.Topic != "task" || ev.Type != "state" {
		return
	}
	s.mu.Lock()
	s.mu.transitions++
	s.mu.Unlock()
}

// timing is the checker's TimingFunc: each rendering of a task, with its
// timing tm to update; first: the task has just entered the view.
func (s *stats) timing(t *client.Task, tm *check.Timing, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if first {
		s.mu.seen++
	}
	if tm.Done {
		return
	}
	at := t.Since.UnixMilli()
	switch t.State {
	case "new", "pending":
		if tm.Created == 0 {
			tm.Created = at
		}
	case "assigned":
		if tm.Assigned == 0 {
			tm.Assigned = at
			if tm.Created != 0 {
				_ = s.mu.c2a.RecordValue(max(at-tm.Created, 1))
			}
		}
	case "accepted", "preparing", "ready", "starting":
	case "running":
		tm.Done = true
		if tm.Created != 0 {
			_ = s.mu.c2r.RecordValue(max(at-tm.Created, 1))
		}
		if tm.Assigned != 0 {
			_ = s.mu.a2r.RecordValue(max(at-tm.Assigned, 1))
		}
	default:
		tm.Done = true // ended before it ran
	}
}

// started returns how many tasks the stream saw start (create to running).
func (s *stats) started() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.c2r.TotalCount()
}

// useSample makes latencies report l instead of the stream's figures.
func (s *stats) useSample(l []report.Latency) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.sampled = l
}

func (s *stats) counts() (transitions, seen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.transitions, s.mu.seen
}

func latency(name string, h *hdrhistogram.Histogram) report.Latency {
	l := report.Latency{Name: name, Count: h.TotalCount(), P50: float64(h.ValueAtQuantile(50)),
		P90: float64(h.ValueAtQuantile(90)), P99: float64(h.ValueAtQuantile(99)), Max: float64(h.Max())}
	for _, b := range h.Distribution() {
		if b.Count > 0 {
			l.Buckets = append(l.Buckets, report.Bucket{UpToMs: float64(b.To), Count: b.Count})
		}
	}
	if len(l.Buckets) > 200 { // keep charts small: merge neighbours
		merged := make([]report.Bucket, 0, 200)
		step := (len(l.Buckets) + 199) / 200
		for i := 0; i < len(l.Buckets); i += step {
			b := report.Bucket{}
			for j := i; j < min(i+step, len(l.Buckets)); j++ {
				b.UpToMs = l.Buckets[j].UpToMs
				b.Count += l.Buckets[j].Count
			}
			merged = append(merged, b)
		}
		l.Buckets = merged
	}
	return l
}

func (s *stats) latencies() []report.Latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.sampled != nil {
		return s.mu.sampled
	}
	return []report.Latency{latency("create_to_assigned", s.mu.c2a), latency("assigned_to_running", s.mu.a2r),
		latency("create_to_running", s.mu.c2r)}
}

// ms converts a duration to fractional seconds for the report.
func secs(d time.Duration) float64 { return d.Seconds() }
