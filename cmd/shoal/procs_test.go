package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/freeport"
	"shoal/internal/netns"
)

// The built binary, shared by the tests that run real processes.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestMain removes the binary the process tests built (37 MB per run,
// left in the temporary directory before).
//
// A test binary started as a command of shoal's (a test that let `shoal
// loadgen` start its managers and agents from os.Executable, which in a
// test is this binary) exits at once instead of running every test again
// in each child, and those children's children.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintf(os.Stderr, "this test binary was started as 'shoal %s'; a test must run the built binary (shoalBin) for that\n", os.Args[1])
		os.Exit(2)
	}
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func shoalBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shoal-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "shoal")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// syncBuf is an output buffer safe for a process and a test to share.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running shoal process.
type proc struct {
	name   string
	bin    string // the binary to run; empty: shoalBin
	args   []string
	host   *netns.Host // nil: the test's own network namespace
	cmd    *exec.Cmd
	out    *syncBuf
	exited chan struct{}
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args}
	p.start(t)
	t.Cleanup(func() { p.kill() })
	return p
}

// startProcOn is startProc on a network namespace's host.
func startProcOn(t *testing.T, host *netns.Host, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args, host: host}
	p.start(t)
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	p.out = &syncBuf{}
	p.exited = make(chan struct{})
	bin := p.bin
	if bin == "" {
		bin = shoalBin(t)
	}
	if p.host != nil {
		p.cmd = p.host.Command(bin, p.args...)
	} else {
		p.cmd = exec.Command(bin, p.args...)
	}
	p.cmd.Dir = t.TempDir() // never pick up a dragonboat-soft-settings.json
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// cliTLSDirs maps a manager's API address to the TLS directory (admin
// credential) cli and cliErr use against it; absent: plain HTTP.
var cliTLSDirs sync.Map

// cli runs one CLI command against addr and returns its stdout, failing
// the test on a non-zero exit.
func cli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := cliErr(t, addr, args...)
	if err != nil {
		t.Fatalf("shoal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func cliErr(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(shoalBin(t), args...)
	cmd.Env = append(os.Environ(), "SHOAL_ADDR="+addr, "SHOAL_TLS_DIR=")
	if dir, ok := cliTLSDirs.Load(addr); ok {
		cmd.Env = append(cmd.Env, "SHOAL_TLS_DIR="+dir.(string))
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still waiting after %s: %s", what, timeout, detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// taskRow is what `service ps --format json` prints per task.
type taskRow struct {
	ID       string `json:"id"`
	Slot     uint32 `json:"slot"`
	Node     uint32 `json:"node"`
	Desired  string `json:"desired"`
	State    string `json:"state"`
	ExitCode int32  `json:"exit_code"`
	Message  string `json:"message"`
}

func psJSON(t *testing.T, addr, service string) []taskRow {
	t.Helper()
	out, err := cliErr(t, addr, "service", "ps", service, "--format", "json")
	if err != nil {
		return nil
	}
	var rows []taskRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ps --format json: %v\n%s", err, out)
	}
	return rows
}

// countState counts a service's tasks in state (wanted running when
// desired is "running").
func countState(rows []taskRow, state string) int {
	n := 0
	for _, r := range rows {
		if r.State == state && r.Desired == "running" {
			n++
		}
	}
	return n
}

// pidsOf lists the processes whose command line contains marker.
func pidsOf(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			// Zombies keep no command line; a live match is a live process.
			pids = append(pids, pid)
		}
	}
	return pids
}

// readEnviron returns a process's environment, entries separated by
// newlines.
func readEnviron(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return strings.ReplaceAll(string(b), "\x00", "\n"), err
}

// killLeftovers kills, when the test ends, every process whose command line
// holds marker: task processes outlive a killed agent by design.
func killLeftovers(t *testing.T, marker string) {
	t.Cleanup(func() {
		for _, pid := range pidsOf(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// oneManager starts one `serve --insecure` replica (one service group,
// critical Raft logs, the flags in extra) and agents node-1 … node-n
// joined to it, and waits until the manager is ready and every node is.
// A failed test logs every process's output.
func oneManager(t *testing.T, n int, extra ...string) (api string, srv *proc, agents map[string]*proc) {
	t.Helper()
	root := t.TempDir()
	api = freeAddr(t)
	srv = startProc(t, "serve", append([]string{"serve", "--insecure", "--api-addr", api,
		"--data-dir", filepath.Join(root, "m"), "--groups", "1", "--raft-log-level", "critical"}, extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- %s\n%s", srv.name, srv.out.String())
			for _, p := range agents {
				t.Logf("--- %s\n%s", p.name, p.out.String())
			}
		}
	})
	waitFor(t, 30*time.Second, "manager ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "shoal: ready"), srv.out.String()
	})
	agents = map[string]*proc{}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		agents[name] = startProc(t, "agent-"+name, "agent", "--insecure", "--join", api,
			"--data-dir", filepath.Join(root, name), "--hostname", name)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("%d nodes ready", n), func() (bool, string) {
		out, _ := cliErr(t, api, "node", "ls")
		return strings.Count(out, "Ready") == n, out
	})
	return api, srv, agents
}
