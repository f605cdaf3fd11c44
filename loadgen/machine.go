package loadgen

import (
	"os"
	"runtime"
	"strings"

	"shoal/internal/meminfo"
	"shoal/loadgen/report"
)

// machine describes this machine; loadStart is the load average read when
// the run began.
func machine(loadStart string) report.Machine {
	return report.Machine{CPUs: runtime.NumCPU(), MemoryBytes: memTotal(), OSArch: runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion: runtime.Version(), LoadAvgStart: loadStart, LoadAvgEnd: loadAvg()}
}

// loadAvg is the 1, 5 and 15 minute load average ("" where /proc has none).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// memTotal is the machine's memory in bytes (0 where /proc has none).
func memTotal() uint64 {
	n, _ := meminfo.Total("/")
	return uint64(n)
}
