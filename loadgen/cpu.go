package loadgen

import (
	"fmt"
	"math"
	"strconv"
	"syscall"

	"shoal/internal/procstat"
	"shoal/loadgen/report"
)

// cpuBook adds up the CPU seconds each source of load used (a replica,
// the agents' processes, the loadgen) from counters that start again at
// zero in every new process. A source has one slot per process it runs at
// once (the agents: one per fleet process); a process in a slot replaced
// by another (a replica killed and restarted) leaves what it used in the
// slot's base. The CPU a process used between its last reading and its
// death is not counted.
type cpuBook struct {
	slots map[string]map[string]*cpuSlot // source → slot
}

// cpuSlot is one process position of a source.
type cpuSlot struct {
	base float64 // what the slot's earlier processes used
	proc string  // the process the last reading came from
	last float64 // that process's last reading
}

func newCPUBook() *cpuBook { return &cpuBook{slots: map[string]map[string]*cpuSlot{}} }

// observe records that process proc, in slot `slot` of src, has used v
// CPU seconds since it started.
func (b *cpuBook) observe(src, slot, proc string, v float64) {
	if b.slots[src] == nil {
		b.slots[src] = map[string]*cpuSlot{}
	}
	sl := b.slots[src][slot]
	switch {
	case sl == nil:
		sl = &cpuSlot{}
		b.slots[src][slot] = sl
	// A counter that went back is a new process too: a replica's start
	// time is in whole seconds, and one restarted within the second its
	// previous process started keeps it.
	case sl.proc != proc || v < sl.last:
		sl.base += sl.last
	}
	sl.proc, sl.last = proc, v
}

// total is src's CPU seconds over all its slots and processes so far.
func (b *cpuBook) total(src string) float64 {
	t := 0.0
	for _, sl := range b.slots[src] {
		t += sl.base + sl.last
	}
	return t
}

// procCPU returns the CPU seconds (user and system) process pid has used,
// and the time it started (in clock ticks since boot, which tells two
// processes of the same ID apart); false where /proc cannot say.
func procCPU(pid int) (seconds float64, started string, ok bool) {
	st, err := procstat.Read("/proc", pid)
	if err != nil {
		return 0, "", false
	}
	return st.CPUSeconds(), strconv.FormatUint(st.StartTime, 10), true
}

// selfCPU returns the CPU seconds this process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func replicaSource(id uint64) string { return "replica " + strconv.FormatUint(id, 10) }

// pidder is a fleet whose agents run in processes of their own.
type pidder interface{ Pids() []int }

// observeLocalCPU reads the CPU the agents' processes and this process
// have used. s.mu is held.
func (s *sampler) observeLocalCPU() {
	if f, ok := s.r.fleet.(pidder); ok {
		for k, pid := range f.Pids() {
			if sec, started, ok := procCPU(pid); ok {
				s.cpu.observe("agents", strconv.Itoa(k), started, sec)
			}
		}
	}
	s.cpu.observe("loadgen", "", "self", selfCPU())
}

// cpuMark is a CPU source's total at its last reading and the index of
// the sample that read it.
type cpuMark struct {
	total float64
	at    int
}

// recordCPU appends src's entry for the sample just taken (the last of
// s.ser.Seconds). When src was read in it (read), the CPU used since its
// previous reading is spread evenly over the samples since then, which
// also fills the seconds it could not be read (a replica too busy to
// answer its metrics in time): the entries times their seconds add up to
// the CPU it used. A source's first reading only sets its mark. s.mu is
// held.
func (s *sampler) recordCPU(src string, read bool) {
	i := len(s.ser.Seconds) - 1
	s.ser.CPU[src] = append(s.ser.CPU[src], 0)
	if !read || i < 0 {
		return
	}
	total := s.cpu.total(src)
	prev, seen := s.cpuMark[src]
	if !seen {
		s.cpuMark[src] = cpuMark{total: total, at: i}
		return
	}
	dt := s.ser.Seconds[i] - s.ser.Seconds[prev.at]
	if dt <= 0 { // no time passed: the next reading takes this one's CPU
		return
	}
	s.cpuMark[src] = cpuMark{total: total, at: i}
	rate := math.Round(max(0, total-prev.total)/dt*1000) / 1000
	for j := prev.at + 1; j <= i; j++ {
		s.ser.CPU[src][j] = rate
	}
}

// coresNow is the last sample's cores busy as the progress line shows
// them, "replicas+agents+loadgen" (e.g. "1.2+0.4+0.3"): a replica whose
// reading is late counts 0 until it comes. s.mu is held.
func (s *sampler) coresNow() string {
	by := map[string]float64{}
	for src, v := range s.ser.CPU {
		if len(v) > 0 {
			by[report.CPUGroup(src)] += v[len(v)-1]
		}
	}
	return fmt.Sprintf("%.1f+%.1f+%.1f", by["replicas"], by["agents"], by["loadgen"])
}
