package loadgen

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"shoal/loadgen/check"
	"shoal/loadgen/report"
)

// sampler takes one sample per second for the report's series and the
// progress view.
type sampler struct {
	r       *run
	mu      sync.Mutex
	ser     report.Series
	peak    map[uint64]uint64
	last    map[uint64]uint64 // last heap read per replica
	live    map[uint64]uint64 // last live heap read per replica
	prevT   int64
	prevS   time.Duration // when the previous sample was taken
	props   *proposalCounts
	calls   *agentCalls
	cpu     *cpuBook
	cpuMark map[string]cpuMark // each CPU source's last reading
	bar     *progressbar.ProgressBar
}

func newSampler(r *run) *sampler {
	s := &sampler{r: r, peak: map[uint64]uint64{}, last: map[uint64]uint64{}, live: map[uint64]uint64{}, props: newProposalCounts(), calls: newAgentCalls(),
		cpu: newCPUBook(), cpuMark: map[string]cpuMark{}}
	s.ser.HeapInuse = map[string][]uint64{}
	s.ser.CPU = map[string][]float64{}
	if r.cfg.Terminal {
		s.bar = progressbar.NewOptions(r.cfg.Tasks, progressbar.OptionSetWriter(r.cfg.Out),
			progressbar.OptionSetWidth(30), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return s
}

func (s *sampler) loop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			if s.bar != nil {
				_ = s.bar.Finish()
			}
			return
		case <-tick.C:
		}
		line := s.sample(ctx)
		n++
		if s.bar != nil {
			s.bar.Describe(line)
		} else if n%5 == 0 {
			fmt.Fprintln(s.r.cfg.Out, line)
		}
	}
}

// sample takes one sample and returns the progress line.
func (s *sampler) sample(ctx context.Context) string {
	r := s.r
	at := time.Since(r.start)
	byState := r.checker.ByState()
	viewRunning := byState[7]
	tr, _ := r.stats.counts()
	heaps := map[uint64]uint64{}
	props := map[int]uint64{} // proposals since the last sample, per group
	metricRunning := -1
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, rep := range r.cl.Replicas {
		if !rep.Alive() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
			defer cancel()
			m, err := r.cl.Access.Scrape(sctx, rep.API)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			heaps[rep.ID] = m.HeapInuse
			metricRunning = max(metricRunning, m.Tasks["running"])
			s.mu.Lock()
			if m.HeapLive > 0 {
				s.live[rep.ID] = m.HeapLive
			}
			s.props.add(rep.ID, m.Proposals, m.Commands, props)
			s.props.terms(m.Terms)
			s.calls.add(rep.ID, m.AgentCalls)
			if m.Started != "" {
				s.cpu.observe(replicaSource(rep.ID), "", m.Started, m.CPUSeconds)
			}
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	// The running figure is the cluster's (the replicas' metrics); the
	// states and the lag are the event stream's view, which trails the
	// cluster under load.
	running := viewRunning
	var lag int64
	if metricRunning >= 0 {
		running = metricRunning
		lag = int64(metricRunning - viewRunning)
		if lag < 0 {
			lag = -lag
		}
	}
	conn := r.fleet.Connected()
	age := r.fleet.BeatAge().Seconds()
	s.mu.Lock()
	s.observeLocalCPU()
	dt := (at - s.prevS).Seconds()
	rate := float64(tr - s.prevT)
	s.prevT = tr
	s.props.peak(props, dt)
	s.prevS = at
	s.ser.Seconds = append(s.ser.Seconds, at.Seconds())
	s.ser.Phase = append(s.ser.Phase, r.phase())
	s.ser.TasksRunning = append(s.ser.TasksRunning, running)
	s.ser.Transitions = append(s.ser.Transitions, rate)
	s.ser.Connected = append(s.ser.Connected, conn)
	s.ser.BeatAge = append(s.ser.BeatAge, age)
	s.ser.LagTasks = append(s.ser.LagTasks, lag)
	for _, rep := range r.cl.Replicas {
		k := strconv.FormatUint(rep.ID, 10)
		h := heaps[rep.ID]
		s.ser.HeapInuse[k] = append(s.ser.HeapInuse[k], h)
		if h > 0 {
			s.last[rep.ID] = h
			s.peak[rep.ID] = max(s.peak[rep.ID], h)
		}
	}
	s.recordCPU("agents", true)
	s.recordCPU("loadgen", true)
	for _, rep := range r.cl.Replicas {
		_, read := heaps[rep.ID]
		s.recordCPU(replicaSource(rep.ID), read)
	}
	cores := s.coresNow()
	s.mu.Unlock()
	if s.bar != nil {
		_ = s.bar.Set(min(running, r.cfg.Tasks))
	}
	var st []string
	for i, n := range byState {
		if n > 0 && i != 7 {
			st = append(st, fmt.Sprintf("%s=%d", check.States[i], n))
		}
	}
	var hp []string
	for _, rep := range r.cl.Replicas {
		if h := heaps[rep.ID]; h > 0 {
			hp = append(hp, fmt.Sprintf("m%d=%dMiB", rep.ID, h>>20))
		} else {
			hp = append(hp, fmt.Sprintf("m%d=?", rep.ID)) // its metrics did not answer in time
		}
	}
	view := ""
	if len(st) > 0 {
		view = "  view: " + strings.Join(st, " ")
	}
	from := ""
	if metricRunning < 0 {
		from = " (no replica answered: the event view's count)"
	}
	return fmt.Sprintf("%5.0fs %-7s agents %d/%d (beats ≤%.0fs apart)  running %d/%d%s%s  %.0f tr/s  lag %d  heap %s  cores %s  violations %d",
		at.Seconds(), r.phase(), conn, r.cfg.Agents, age, running, r.cfg.Tasks, from, view, rate, lag,
		strings.Join(hp, " "), cores, r.checker.Count())
}

// beatAgeMax is the largest agent heartbeat age sampled (seconds).
func (s *sampler) beatAgeMax() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0.0
	for _, a := range s.ser.BeatAge {
		m = max(m, a)
	}
	return m
}

// series returns a copy of the samples, sharing nothing with the sampler.
func (s *sampler) series() report.Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ser
	out.Seconds, out.Phase = slices.Clone(s.ser.Seconds), slices.Clone(s.ser.Phase)
	out.TasksRunning, out.Transitions = slices.Clone(s.ser.TasksRunning), slices.Clone(s.ser.Transitions)
	out.Connected, out.BeatAge, out.LagTasks = slices.Clone(s.ser.Connected), slices.Clone(s.ser.BeatAge), slices.Clone(s.ser.LagTasks)
	out.HeapInuse, out.CPU = map[string][]uint64{}, map[string][]float64{}
	for k, v := range s.ser.HeapInuse {
		out.HeapInuse[k] = slices.Clone(v)
	}
	for k, v := range s.ser.CPU {
		out.CPU[k] = slices.Clone(v)
	}
	return out
}

// agentCalls returns the agents' calls per endpoint, spread over agents
// and seconds.
func (s *sampler) agentCalls(agents int, seconds float64) []report.AgentCalls {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls.report(agents, seconds)
}

// proposals returns the proposals per group over seconds.
func (s *sampler) proposals(seconds float64) []report.GroupLoad {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.props.report(seconds)
}

func (s *sampler) rate() report.Rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r report.Rate
	for _, v := range s.ser.Transitions {
		r.Mean += v
		r.Peak = max(r.Peak, v)
	}
	if n := len(s.ser.Transitions); n > 0 {
		r.Mean /= float64(n)
	}
	return r
}
