package loadgen

import (
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"shoal/api/client"
	"shoal/loadgen/report"
)

// timing is what the stream showed of one task's start.
type timing struct {
	created  int64 // unix ms; 0 unknown
	assigned int64
	done     bool // running seen (latencies recorded)
}

// stats measures latencies and transitions from the event stream. Times
// come from the tasks' Since (the manager's clock, on the same machine).
type stats struct {
	mu struct {
		sync.Mutex
		// tasks holds each task's timing in place: one map read per
		// event, no object of its own to reach (the stream's reader
		// spent most of its statistics in these reads).
		tasks       map[uint64]timing
		c2a, a2r    *hdrhistogram.Histogram
		c2r         *hdrhistogram.Histogram
		transitions int64
		seen        int64
		// sampled replaces the stream's latencies (rampLatencies).
		sampled []report.Latency
	}
}

// newStats returns the statistics of a run of about tasks tasks.
func newStats(tasks int) *stats {
	s := &stats{}
	s.mu.tasks = make(map[uint64]timing, max(tasks, 0))
	s.mu.c2a = hdrhistogram.New(1, 3_600_000, 3)
	s.mu.a2r = hdrhistogram.New(1, 3_600_000, 3)
	s.mu.c2r = hdrhistogram.New(1, 3_600_000, 3)
	return s
}

func (s *stats) event(ev client.Event) {
	if ev.Topic != "task" {
		return
	}
	id, err := strconv.ParseUint(ev.Key, 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == "deleted" {
		delete(s.mu.tasks, id)
		return
	}
	if ev.Type == "state" {
		s.mu.transitions++
	}
	t := ev.Task
	if t == nil {
		return
	}
	tm, ok := s.mu.tasks[id]
	if !ok {
		s.mu.seen++
	}
	if tm.done {
		return
	}
	was := tm
	at := t.Since.UnixMilli()
	switch t.State {
	case "new", "pending":
		if tm.created == 0 {
			tm.created = at
		}
	case "assigned":
		if tm.assigned == 0 {
			tm.assigned = at
			if tm.created != 0 {
				_ = s.mu.c2a.RecordValue(max(at-tm.created, 1))
			}
		}
	case "accepted", "preparing", "ready", "starting":
	case "running":
		tm.done = true
		if tm.created != 0 {
			_ = s.mu.c2r.RecordValue(max(at-tm.created, 1))
		}
		if tm.assigned != 0 {
			_ = s.mu.a2r.RecordValue(max(at-tm.assigned, 1))
		}
	default:
		tm.done = true // ended before it ran
	}
	if !ok || tm != was {
		s.mu.tasks[id] = tm
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
