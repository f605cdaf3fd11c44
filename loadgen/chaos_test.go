package loadgen

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects the run's progress lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildShoal builds the shoal binary into a temporary directory, with
// the build tags given.
func buildShoal(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shoal")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	build := exec.Command("go", append(args, "../cmd/shoal")...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A small chaos run: three `shoal serve` processes of the built binary,
// 150 simulated agents in two processes of their own (so the agents'
// observations are merged across processes, as from 2,500 agents on),
// 3,000 tasks, churn, agent disconnects and vanishes, one leader kill; no
// invariant may break and the cluster must converge. Every phase is
// bounded, so the run ends by itself.
func TestChaosRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three managers and 150 agents")
	}
	bin := buildShoal(t)
	var out lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Binary: bin, Agents: 150, Tasks: 3000, Services: 12, Seed: 7, Groups: 4,
		DataDir: t.TempDir(), SyncInterval: 3 * time.Second,
		RampTimeout: 20 * time.Second, Churn: 6 * time.Second, Faults: 9 * time.Second, QuiesceTimeout: 30 * time.Second,
		ChurnRate: 4, CrashRate: 10, FaultShare: 0.1, LeaderKillEvery: 5 * time.Second,
		AgentsPerProcess: 75, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var table strings.Builder
	_ = writeTable(&table, rep)
	t.Logf("progress:\n%s\n%s", out.String(), table.String())
	if !strings.Contains(out.String(), "in 2 processes of their own") {
		t.Errorf("the agents did not run in two processes")
	}
	if rep.Violations != 0 {
		for _, v := range rep.ViolationList {
			t.Errorf("violation %s: %s %v", v.Invariant, v.Message, v.Objects)
		}
	}
	if !rep.Converged || rep.TasksRunning != 3000 {
		t.Errorf("did not converge: %d running, converged=%v", rep.TasksRunning, rep.Converged)
	}
	if rep.Counts.LeaderKills < 1 || rep.Counts.Disconnects+rep.Counts.Vanishes == 0 || rep.Counts.Updates == 0 {
		t.Errorf("the faults and churn did not happen: %+v", rep.Counts)
	}
	for _, inv := range rep.Invariants {
		if inv.Checked == 0 {
			t.Errorf("invariant %s was never checked", inv.Name)
		}
	}
	// Live heap is read from every replica, and is part of the heap in use.
	if rep.HeapLiveBytesPerTask <= 0 || rep.HeapLiveBytesPerTask > rep.HeapBytesPerTask {
		t.Errorf("heap per task: %.0f B live, %.0f B in use; want live above 0 and at most in use",
			rep.HeapLiveBytesPerTask, rep.HeapBytesPerTask)
	}
}
