package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"shoal/internal/meminfo"
	"shoal/wire"
)

// ErrDataDirInUse: another agent runs on the same data directory.
var ErrDataDirInUse = errors.New("in use by another agent")

// LockDataDir creates dir if needed and takes an exclusive lock on
// dir/agent.lock for the life of the process (flock: released by the
// kernel when the process dies, even by kill -9). A second agent on the
// same directory gets ErrDataDirInUse naming the holder's pid. Errors do
// not repeat dir: the caller says which directory (or flag) it was.
func LockDataDir(dir string) (release func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the directory: %w", err)
	}
	path := filepath.Join(dir, "agent.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (process %s): stop that agent or choose another --data-dir",
				ErrDataDirInUse, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil // closing the file drops the lock
}

// DescribeNode describes this machine: hostname (os.Hostname when empty),
// labels, CPU in milli-cores and memory in bytes (from /proc/meminfo, 0 if
// unreadable).
func DescribeNode(hostname string, labels map[string]string, version string) wire.NodeDescription {
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	return wire.NodeDescription{Hostname: hostname, Labels: labels, CPU: int64(runtime.NumCPU()) * 1000,
		Memory: memTotal(), AgentVersion: version}
}

// memTotal is the machine's memory in bytes (0 where /proc has none).
func memTotal() int64 {
	n, _ := meminfo.Total("/")
	return n
}
