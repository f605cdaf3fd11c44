package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"shoal/api/client"
	"shoal/loadgen/report"
	"shoal/loadgen/workload"
)

// The event stream's view cannot follow a million-task ramp on a 2-core
// machine: its events come faster than one stream renders and decodes them,
// the manager's ring moves past the stream, and re-reading every task takes
// longer than the ring lasts. The ramp's latencies then come from a uniform
// sample of the ramp's tasks, read one by one with their histories: each
// history entry carries the time of the Raft entry that made the change,
// the same clock the stream's figures use.

// sampleSize is how many tasks the sample reads at most.
const sampleSize = 10000

// streamCoverage is the share of the ramp's tasks the stream must have seen
// reach running for its latencies to stand; below it they are sampled.
const streamCoverage = 0.9

// rampTiming is one task's start as its history tells it (unix ms; 0: not
// in the retained history).
type rampTiming struct{ created, assigned, running int64 }

// timingOf reads a task's start from its history: the first new, assigned
// and running transitions.
func timingOf(t client.Task) rampTiming {
	var tm rampTiming
	for _, h := range t.History {
		if h.Kind != "transition" {
			continue
		}
		at := h.At.UnixMilli()
		switch h.State {
		case "new":
			if tm.created == 0 {
				tm.created = at
			}
		case "assigned":
			if tm.assigned == 0 {
				tm.assigned = at
			}
		case "running":
			if tm.running == 0 {
				tm.running = at
			}
		}
	}
	return tm
}

// sampleIDs draws, per service, offsets into its first task's ID: a ramp
// creates each service's replicas in one entry, so they hold consecutive
// IDs of its group from the lowest. Each service gets a share of n in
// proportion to its replicas; the same seed draws the same offsets.
func sampleIDs(seed uint64, services []workload.Service, first map[string]uint64, n int) map[string][]uint64 {
	total := 0
	for _, s := range services {
		total += s.Replicas
	}
	out := map[string][]uint64{}
	if total == 0 {
		return out
	}
	rng := rand.New(rand.NewPCG(seed, 0x5a3b1e))
	for _, s := range services {
		base, ok := first[s.Name]
		if !ok || s.Replicas == 0 {
			continue
		}
		k := min(s.Replicas, max(1, n*s.Replicas/total))
		for _, off := range rng.Perm(s.Replicas)[:k] {
			out[s.Name] = append(out[s.Name], base+uint64(off))
		}
	}
	return out
}

// latencySample is the sampled latencies and how many tasks they cover.
type latencySample struct {
	c2a, a2r, c2r *hdrhistogram.Histogram
	read, used    int
}

func newLatencySample() *latencySample {
	return &latencySample{c2a: hdrhistogram.New(1, 3_600_000, 3), a2r: hdrhistogram.New(1, 3_600_000, 3),
		c2r: hdrhistogram.New(1, 3_600_000, 3)}
}

// add records one task's timing; a task without a retained creation or
// not running yet adds what it can.
func (l *latencySample) add(tm rampTiming) {
	l.read++
	if tm.running == 0 {
		return
	}
	l.used++
	if tm.created != 0 {
		_ = l.c2r.RecordValue(max(tm.running-tm.created, 1))
		if tm.assigned != 0 {
			_ = l.c2a.RecordValue(max(tm.assigned-tm.created, 1))
		}
	}
	if tm.assigned != 0 {
		_ = l.a2r.RecordValue(max(tm.running-tm.assigned, 1))
	}
}

func (l *latencySample) latencies(source string) []report.Latency {
	out := []report.Latency{latency("create_to_assigned", l.c2a), latency("assigned_to_running", l.a2r),
		latency("create_to_running", l.c2r)}
	for i := range out {
		out[i].Source = source
	}
	return out
}

// sampleRampLatencies reads a uniform sample of the ramp's tasks with their
// histories from the managers, 16 reads at a time, and returns their
// latencies. A service whose first task cannot be read in time is left
// out of the sample, and so is a task that cannot be read.
func (r *run) sampleRampLatencies(ctx context.Context) (*latencySample, error) {
	svcs := r.plan.Services
	names := make([]string, len(svcs))
	for i, s := range svcs {
		names[i] = s.Name
	}
	first := r.driver.FirstTasks(ctx, names, 16, 20*time.Second)
	if len(first) == 0 {
		return nil, fmt.Errorf("no service's first task could be read: %w", context.Cause(ctx))
	}
	byService := sampleIDs(r.cfg.Seed, svcs, first, sampleSize)
	var ids []uint64
	var owners []string
	for _, s := range svcs {
		for _, id := range byService[s.Name] {
			ids, owners = append(ids, id), append(owners, s.Name)
		}
	}
	out := newLatencySample()
	for i, t := range r.driver.ReadTasks(ctx, ids, 16, 10*time.Second) {
		if t != nil && t.Service == owners[i] { // else unread, gone, or not one of the service's first replicas
			out.add(timingOf(*t))
		}
	}
	return out, nil
}

// rampLatencies replaces the stream's latencies with a sample's when the
// stream saw fewer than streamCoverage of the running tasks start.
func (r *run) rampLatencies(ctx context.Context, running int) {
	seen := r.stats.started()
	if running == 0 || float64(seen) >= streamCoverage*float64(running) {
		return
	}
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	s, err := r.sampleRampLatencies(cctx)
	if err == nil && s.used == 0 {
		err = fmt.Errorf("none of its %d tasks read runs", s.read)
	}
	if err != nil {
		r.logf("latencies: the stream saw %d of %d tasks start, and the sample could not be read: %v", seen, running, err)
		return
	}
	src := fmt.Sprintf("sample: %d of the ramp's tasks read with their histories (the event stream saw %d of %d start)", s.used, seen, running)
	r.logf("latencies from a %s, in %.1fs", src, time.Since(t0).Seconds())
	r.stats.useSample(s.latencies(src))
}
