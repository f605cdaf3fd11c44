package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `shoal serve --dev` runs services of real processes through the CLI, and
// stops them when it stops.
func TestServeDev(t *testing.T) {
	const marker = "sleep 7773"
	killLeftovers(t, marker)
	api := freeAddr(t)
	srv := startProc(t, "serve-dev", "serve", "--dev", "--api-addr", api, "--data-dir", t.TempDir(), "--raft-log-level", "critical")
	waitFor(t, 30*time.Second, "dev mode ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "    bin/shoal node ls\n"), srv.out.String() // the end of the dev mode banner
	})
	// On any address but the default, the commands it suggests must reach
	// it: the first tells the CLI where.
	if !strings.Contains(srv.out.String(), "    export SHOAL_ADDR="+api+"\n    bin/shoal service create") {
		t.Errorf("serve --dev on %s does not say which address the suggested commands need:\n%s", api, srv.out.String())
	}
	out := cli(t, api, "service", "create", "web", "--replicas", "2", "--", "sleep", "7773")
	if !strings.Contains(out, "converged: 2/2 running") {
		t.Fatalf("create did not report convergence:\n%s", out)
	}
	if ps := cli(t, api, "service", "ps", "web"); strings.Count(ps, "Running") != 4 { // DESIRED and CURRENT columns
		t.Fatalf("ps:\n%s", ps)
	}
	if n := len(pidsOf(marker)); n != 2 {
		t.Fatalf("%d processes, want 2", n)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve --dev did not stop on SIGTERM:\n%s", srv.out.String())
	}
	waitFor(t, 20*time.Second, "task processes stopped with the dev agent", func() (bool, string) {
		n := len(pidsOf(marker))
		return n == 0, fmt.Sprint(n, " left")
	})
}

// `serve --dev` without --data-dir keeps its state in a fresh temporary
// directory; it removes it when it stops, so every `make run` does not
// leave tens of megabytes behind in /tmp.
func TestServeDevRemovesItsTemporaryDirectory(t *testing.T) {
	killLeftovers(t, "sleep 7774")
	tmp := t.TempDir()
	api := freeAddr(t)
	cmd := exec.Command(shoalBin(t), "serve", "--dev", "--api-addr", api, "--raft-log-level", "critical")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Dir = t.TempDir()
	out := &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitFor(t, 30*time.Second, "dev mode ready", func() (bool, string) {
		return strings.Contains(out.String(), "    bin/shoal node ls\n"), out.String()
	})
	dirs, _ := filepath.Glob(filepath.Join(tmp, "shoal-dev-*"))
	if len(dirs) != 1 {
		t.Fatalf("want one shoal-dev-* directory in TMPDIR, found %v", dirs)
	}
	cli(t, api, "service", "create", "web", "--", "sleep", "7774")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve --dev did not stop on SIGINT:\n%s", out.String())
	}
	if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
		t.Fatalf("%s is still there after serve --dev stopped (%v):\n%s", dirs[0], err, out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out.String())
	}
}
