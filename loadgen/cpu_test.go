package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"shoal/loadgen/report"
)

// Property: however a source's processes come and go, its total is what
// each of its processes used by its last reading, added up; a new process
// is told by its start (proc) or, where that did not change, by its
// counter going back.
func TestCPUBookAddsUpRestartedProcesses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		b := newCPUBook()
		want := 0.0
		proc, used := "p0", 0.0
		for step := range 50 {
			if rng.IntN(8) == 0 { // killed: what it used stays counted
				want += used
				if used < 1 || rng.IntN(2) == 0 {
					proc = fmt.Sprint("p", step)
				} // else restarted within the same second: same start, its counter back below 1
				used = 0
			}
			used += rng.Float64()
			b.observe("replica 1", "", proc, used)
		}
		want += used
		if got := b.total("replica 1"); math.Abs(got-want) > 1e-9 {
			t.Fatalf("trial %d: total %.6f, want %.6f", trial, got, want)
		}
	}
}

func TestProcCPU(t *testing.T) {
	if sec, _, ok := procCPU(1 << 30); ok {
		t.Fatalf("a process that does not exist used %v s", sec)
	}
}

// Property: the CPU series, each sample's cores times the seconds since
// the sample before, adds up to the CPU a source used between its first
// and last reading, also when some samples could not read it and when
// its process restarted in between.
func TestCPUSeriesKeepsEveryCPUSecond(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 100 {
		s := &sampler{cpu: newCPUBook(), cpuMark: map[string]cpuMark{}}
		s.ser.CPU = map[string][]float64{}
		at, used, proc := 0.0, 0.0, "a"
		var firstTotal, lastTotal float64
		first := -1
		for i := range 60 {
			at += 0.5 + rng.Float64() // samples are about a second apart
			s.ser.Seconds = append(s.ser.Seconds, at)
			s.ser.Phase = append(s.ser.Phase, "ramp")
			if rng.IntN(10) == 0 {
				proc, used = proc+"'", 0 // restarted
			}
			used += rng.Float64() * 2
			read := rng.IntN(3) != 0
			if read {
				s.cpu.observe("replica 1", "", proc, used)
				if first < 0 {
					first, firstTotal = i, s.cpu.total("replica 1")
				}
				lastTotal = s.cpu.total("replica 1")
			}
			s.recordCPU("replica 1", read)
		}
		got := report.PhaseCPU(s.ser, report.Phase{Name: "ramp", Seconds: at})["replicas"]
		if want := lastTotal - firstTotal; math.Abs(got-want) > 0.05 {
			t.Fatalf("trial %d: the series adds up to %.3f CPU seconds, the readings to %.3f", trial, got, want)
		}
	}
}

// The progress line shows the last sample's cores per group.
func TestCoresNowGroupsTheLastSample(t *testing.T) {
	s := &sampler{}
	s.ser.CPU = map[string][]float64{"replica 1": {9, 0.5}, "replica 2": {9, 0.25}, "agents": {9, 0.3}, "loadgen": {9, 0.1}}
	if got := s.coresNow(); got != "0.8+0.3+0.1" {
		t.Fatalf("coresNow = %q, want 0.8+0.3+0.1", got)
	}
}
