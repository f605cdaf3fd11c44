package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// `shoal service logs` against three TLS managers and two real agents,
// each agent polling a different manager, the CLI asking a follower: the
// lines come from both nodes, --tail keeps the last lines, -f prints a new
// line within 3 s (the figure is logged), and a node whose agent died is
// named in a note while the other node's lines still arrive.
func TestServiceLogs(t *testing.T) {
	began := time.Now()
	c := startTestCluster(t, 0)
	t.Logf("three managers up after %s", time.Since(began).Round(time.Millisecond))
	defer func() {
		if t.Failed() {
			t.Log(c.dump())
		}
	}()
	root := t.TempDir()
	token := strings.TrimSpace(cli(t, c.apis[1], "token", "worker", "-q"))
	// Agent i polls manager i+1 (the session's manager list keeps the
	// manager it reached first as its current one).
	for i := 1; i <= 2; i++ {
		c.agents = append(c.agents, startProc(t, fmt.Sprintf("agent-%d", i), "agent", "--join", c.apis[i],
			"--data-dir", filepath.Join(root, fmt.Sprintf("a%d", i)), "--hostname", fmt.Sprintf("node-%d", i),
			"--token", token))
	}
	waitFor(t, 30*time.Second, "agents joined", func() (bool, string) {
		out, _ := cliErr(t, c.api(), "node", "ls")
		return strings.Count(out, "Ready") == 2, out
	})
	follower := ""
	for _, api := range c.apis {
		var st struct {
			Leading bool `json:"leading"`
		}
		if out, err := cliErr(t, api, "status", "--format", "json"); err == nil && json.Unmarshal([]byte(out), &st) == nil && !st.Leading {
			follower = api
			break
		}
	}
	if follower == "" {
		t.Fatal("no follower found")
	}
	trigger := filepath.Join(root, "trigger")
	// Each task prints 20 numbered lines, then whatever appears in the
	// trigger file (one of the two tasks takes it), until the test's
	// directory is gone (a killed agent leaves its tasks running).
	script := `for i in $(seq 1 20); do echo "old $i $SHOAL_SLOT"; done; echo "err line" >&2
while [ -d ` + root + ` ]; do if mv ` + trigger + ` ` + trigger + `.$$ 2>/dev/null; then cat ` + trigger + `.$$; rm -f ` + trigger + `.$$; fi; sleep 0.05; done`
	cli(t, follower, "service", "create", "chatty", "--mode", "global", "--", "sh", "-c", script)
	c.running("chatty", 2, 30*time.Second)

	// Both nodes' lines, through a follower, with --tail 5.
	var out string
	waitFor(t, 15*time.Second, "the last 5 lines of each task from both nodes", func() (bool, string) {
		var err error
		out, err = cliErr(t, follower, "service", "logs", "chatty", "--tail", "5")
		if err != nil {
			return false, out
		}
		return strings.Count(out, "@node-1 ") >= 6 && strings.Count(out, "@node-2 ") >= 6, out
	})
	for _, node := range []string{"node-1", "node-2"} {
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "@"+node+" ") && strings.Contains(l, "| old ") {
				got = append(got, strings.Fields(strings.SplitN(l, "| ", 2)[1])[1])
			}
		}
		if !slices.Equal(got, []string{"16", "17", "18", "19", "20"}) {
			t.Fatalf("--tail 5 on %s printed lines %v, want old 16..20:\n%s", node, got, out)
		}
		if !strings.Contains(out, "@"+node+" | err line") && !strings.Contains(out, "@"+node+"  | err line") {
			t.Fatalf("no stderr line of %s:\n%s", node, out)
		}
	}
	if !strings.HasPrefix(out, "chatty.") {
		t.Fatalf("lines are not prefixed with the task's name:\n%s", out)
	}
	// One task, by a prefix of its printed ID.
	id := strings.Fields(cli(t, follower, "service", "ps", "chatty", "-q"))[0]
	one := cli(t, follower, "service", "logs", id[:6], "--tail", "1")
	if lines := strings.Split(strings.TrimSpace(one), "\n"); len(lines) != 2 || !strings.Contains(one, "."+id+"@") ||
		!strings.Contains(lines[0], "| old 20") {
		t.Fatalf("service logs %s (task %s) printed:\n%s", id[:6], id, one)
	}

	// -f: a line the task prints shows up within 3 s.
	f := startFollow(t, follower, "service", "logs", "chatty", "-f", "--tail", "1", "--no-task-ids")
	f.waitFor(t, 15*time.Second, func(l string) bool { return strings.Contains(l, "@node-1") }, "a line of node-1")
	f.waitFor(t, 15*time.Second, func(l string) bool { return strings.Contains(l, "@node-2") }, "a line of node-2")
	var worst time.Duration
	var figures []string
	for i := range 3 {
		want := fmt.Sprintf("fresh-%d", i)
		start := time.Now()
		if err := os.WriteFile(trigger+".tmp", []byte(want+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(trigger+".tmp", trigger); err != nil {
			t.Fatal(err)
		}
		f.waitFor(t, 3*time.Second, func(l string) bool { return strings.HasSuffix(l, "| "+want) }, want)
		d := time.Since(start)
		worst = max(worst, d)
		figures = append(figures, d.Round(time.Millisecond).String())
	}
	t.Logf("service logs -f: a new line printed after %s (worst %s; the bound is 3s)", strings.Join(figures, ", "), worst.Round(time.Millisecond))
	if regexp.MustCompile(`chatty\.\d+\.[0-9a-z]+@`).MatchString(f.text()) || !strings.Contains(f.text(), "chatty.") {
		t.Fatalf("--no-task-ids printed task IDs:\n%s", f.text())
	}

	// A node whose agent died: the stream says so and still shows the
	// other node's lines.
	c.agents[1].kill()
	gone := time.Now()
	out, err := cliAll(t, follower, "service", "logs", "chatty", "--tail", "2")
	t.Logf("service logs with node-2's agent dead ended after %s", time.Since(gone).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("service logs with a dead node: %v\n%s", err, out)
	}
	if !strings.Contains(out, "@node-1 ") || !strings.Contains(out, "note: node-2") {
		t.Fatalf("want node-1's lines and a note on node-2:\n%s", out)
	}
}

// cliAll runs one CLI command against addr and returns its stdout and
// stderr together.
func cliAll(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(shoalBin(t), args...)
	cmd.Env = append(os.Environ(), "SHOAL_ADDR="+addr, "SHOAL_TLS_DIR=")
	if dir, ok := cliTLSDirs.Load(addr); ok {
		cmd.Env = append(cmd.Env, "SHOAL_TLS_DIR="+dir.(string))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// follow is a CLI process whose output lines are collected as they come.
type follow struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

func startFollow(t *testing.T, addr string, args ...string) *follow {
	t.Helper()
	cmd := exec.Command(shoalBin(t), args...)
	cmd.Env = append(os.Environ(), "SHOAL_ADDR="+addr, "SHOAL_TLS_DIR=")
	if dir, ok := cliTLSDirs.Load(addr); ok {
		cmd.Env = append(cmd.Env, "SHOAL_TLS_DIR="+dir.(string))
	}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	f := &follow{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			f.mu.Lock()
			f.lines = append(f.lines, sc.Text())
			f.mu.Unlock()
			select {
			case f.more <- struct{}{}:
			default:
			}
		}
	}()
	return f
}

func (f *follow) text() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.lines, "\n")
}

// waitFor waits until a line matches, failing the test after timeout.
func (f *follow) waitFor(t *testing.T, timeout time.Duration, match func(string) bool, what string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for seen := 0; ; {
		f.mu.Lock()
		lines := f.lines[seen:]
		seen = len(f.lines)
		f.mu.Unlock()
		if slices.ContainsFunc(lines, match) {
			return
		}
		select {
		case <-f.more:
		case <-deadline.C:
			t.Fatalf("-f did not print %s within %s:\n%s", what, timeout, f.text())
		}
	}
}
