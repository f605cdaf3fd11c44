package loadgen

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
)

// selfProfile is the loadgen's own CPU profile (with --pprof-dir), in the
// same windows as the agents' processes': loadgen.ramp.cpu.prof from the
// ramp's start to its end, loadgen.rest.cpu.prof after it until the
// report. Its event-stream reader and checker are a share of every run's
// CPU that the replicas' and agents' profiles do not show.
type selfProfile struct {
	mu   sync.Mutex
	file *os.File
}

// start ends the window under way and starts the named one, writing to
// dir; it returns the file it writes.
func (p *selfProfile) start(dir, window string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
	name := filepath.Join(dir, fmt.Sprintf("loadgen.%s.cpu.prof", window))
	f, err := os.Create(name)
	if err != nil {
		return "", err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return "", fmt.Errorf("the loadgen's CPU profile: %w", err)
	}
	p.file = f
	return name, nil
}

// stop ends the window under way, if any.
func (p *selfProfile) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

func (p *selfProfile) stopLocked() {
	if p.file == nil {
		return
	}
	pprof.StopCPUProfile()
	p.file.Close()
	p.file = nil
}
