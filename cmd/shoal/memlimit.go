package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/docker/go-units"

	"shoal/internal/meminfo"
)

// memLimitAutoShare is the share of a container's memory limit that
// serve's --memory-limit auto gives the Go runtime as its soft limit: the
// rest is for what the runtime does not count (pebble's block cache
// outside the heap, thread stacks, the binary).
const memLimitAutoShare = 0.9

// memLimit is what --memory-limit resolved to: the bytes (0: none) and
// where they came from, for the start-up line.
type memLimit struct {
	bytes int64
	from  string
}

// resolveMemLimit turns --memory-limit into a soft limit for the Go
// runtime. flag is "auto" (GOMEMLIMIT's when it is set, else 90 % of the
// container's memory limit when there is one, else none), "none",
// a size ("3GiB", "512MiB") or a share of the machine's memory ("75%").
// root is the file system root the cgroup and /proc files are read under
// ("/" in the product).
func resolveMemLimit(flag, root string) (memLimit, error) {
	flag = strings.TrimSpace(flag)
	switch {
	case flag == "" || flag == "auto":
		if env := os.Getenv("GOMEMLIMIT"); env != "" && env != "off" {
			return memLimit{bytes: debug.SetMemoryLimit(-1), from: "GOMEMLIMIT=" + env}, nil
		}
		if c, ok := cgroupMemory(root); ok {
			return memLimit{bytes: int64(float64(c) * memLimitAutoShare), from: fmt.Sprintf("90%% of the container's %s", units.BytesSize(float64(c)))}, nil
		}
		return memLimit{from: "no container limit found"}, nil
	case flag == "none" || flag == "off":
		return memLimit{from: "--memory-limit none"}, nil
	case strings.HasSuffix(flag, "%"):
		p, err := strconv.ParseFloat(strings.TrimSuffix(flag, "%"), 64)
		if err != nil || p <= 0 || p > 100 {
			return memLimit{}, fmt.Errorf("--memory-limit %q: a share of the machine's memory is a percentage above 0 and at most 100 (e.g. 75%%)", flag)
		}
		total, err := meminfo.Total(root)
		if err != nil {
			return memLimit{}, fmt.Errorf("--memory-limit %q: the machine's memory could not be read (%v); give a size such as 4GiB", flag, err)
		}
		return memLimit{bytes: int64(float64(total) * p / 100), from: fmt.Sprintf("%s of the machine's %s", flag, units.BytesSize(float64(total)))}, nil
	}
	n, err := units.RAMInBytes(flag)
	if err != nil || n <= 0 {
		return memLimit{}, fmt.Errorf("--memory-limit %q is not a size (e.g. 4GiB, 512MiB), a share of the machine's memory (e.g. 75%%), auto or none", flag)
	}
	if n < 64<<20 {
		return memLimit{}, fmt.Errorf("--memory-limit %q is below 64MiB: a replica would spend its time collecting garbage; give more, or none", flag)
	}
	return memLimit{bytes: n, from: "--memory-limit " + flag}, nil
}

// apply sets the runtime's soft memory limit, when there is one.
func (m memLimit) apply() {
	if m.bytes > 0 {
		debug.SetMemoryLimit(m.bytes)
	}
}

// String is the start-up line's account of the limit.
func (m memLimit) String() string {
	if m.bytes <= 0 {
		return "memory limit: none (" + m.from + ")"
	}
	return fmt.Sprintf("memory limit: %s (%s)", units.BytesSize(float64(m.bytes)), m.from)
}

// cgroupMemory is the memory limit of the cgroup this process runs in
// (v2's memory.max, else v1's memory.limit_in_bytes), if it has one.
func cgroupMemory(root string) (int64, bool) {
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(s, 10, 64)
		// v2 says "max" for none; v1 says a number near 2^63 rounded to pages.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
