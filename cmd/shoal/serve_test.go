package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runShoal runs the binary to its exit (within a deadline) in a scratch
// working directory and returns its output and error.
func runShoal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shoalBin(t), args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stop sends SIGTERM and waits for the process to exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM:\n%s", p.name, p.out.String())
	}
}

// Bad flags, bad addresses and ports in use are refused with a line saying
// what is wrong, before the data directory is created.
func TestServeRefusesBadInputBeforeWriting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	raft, api := freeAddr(t), freeAddr(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"id 0", []string{"--id", "0"}, "--id must be 1 or more"},
		{"groups 0", []string{"--groups", "0"}, "--groups must be 1 or more"},
		{"raft port in use", []string{"--raft-addr", busy.Addr().String()}, "cannot listen on Raft address"},
		{"api port in use", []string{"--raft-addr", raft, "--api-addr", busy.Addr().String()}, "API address"},
		{"peer port typo", []string{"--raft-addr", raft, "--peers", "1=" + raft + ",2=127.0.0.1:71o2"}, `replica 2's peer address "127.0.0.1:71o2" needs a host and a port number`},
		{"own entry differs", []string{"--raft-addr", raft, "--peers", "1=127.0.0.1:7101,2=" + raft}, "peers give replica 1 address 127.0.0.1:7101"},
		{"not in peers", []string{"--id", "3", "--raft-addr", raft, "--peers", "1=127.0.0.1:7101,2=" + raft}, "do not include this replica (3)"},
		{"raft addr typo", []string{"--raft-addr", "127.0.0.1:71o1"}, "port number"},
		{"raft addr without a port", []string{"--raft-addr", "127.0.0.1"}, `--raft-addr "127.0.0.1" is not host:port (e.g. 127.0.0.1:7101)`},
		{"api addr without a port", []string{"--raft-addr", raft, "--api-addr", "127.0.0.1"}, `--api-addr "127.0.0.1" is not host:port (e.g. 127.0.0.1:7700)`},
		{"mass expiry share", []string{"--mass-expiry-share", "1.5"}, "--mass-expiry-share 1.5 is not a share of the nodes"},
		{"mass expiry hold", []string{"--mass-expiry-hold", "0s"}, "--mass-expiry-hold 0s must be positive"},
		{"max api conns", []string{"--max-api-conns", "-5"}, "--max-api-conns -5 must be 1 or more"},
		{"max handshakes", []string{"--max-handshakes", "0"}, "--max-handshakes 0 must be 1 or more"},
		{"orphan timeout under the down TTL", []string{"--min-heartbeat", "2s", "--orphan-timeout", "5s"}, "--orphan-timeout 5s is shorter than the 6s a silent node takes to go down"},
		{"failover grace past the orphan timeout", []string{"--orphan-timeout", "20s", "--failover-grace", "21s"}, "--failover-grace 21s is out of range: give 0 (none) up to --orphan-timeout (20s)"},
		{"negative failover grace", []string{"--failover-grace", "-1s"}, "--failover-grace -1s is out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--data-dir", dir, "--api-addr", api}, c.args...)
			out, err := runShoal(t, args...)
			if err == nil {
				t.Fatalf("started:\n%s", out)
			}
			if !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Fatalf("want one line saying %q, got:\n%s", c.want, out)
			}
			if m := packagePrefix.FindString(strings.TrimPrefix(strings.TrimSpace(out), "shoal: ")); m != "" {
				t.Fatalf("names a package (%q): %s", m, out)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("data directory written (%v):\n%s", err, out)
			}
		})
	}
}

// A replica started before its peers says once which ones it waits for
// (no dragonboat line per second per peer), is ready when one more comes,
// and both restart from their data directories without --peers.
func TestServeWaitsForPeersAndRecordsThem(t *testing.T) {
	root := t.TempDir()
	var rafts, apis, peers []string
	for i := 1; i <= 3; i++ {
		rafts, apis = append(rafts, freeAddr(t)), append(apis, freeAddr(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i, rafts[i-1]))
	}
	serve := func(i int, withPeers bool) *proc {
		args := []string{"serve", "--id", fmt.Sprint(i), "--api-addr", apis[i-1], "--groups", "2", "--insecure",
			"--data-dir", filepath.Join(root, fmt.Sprintf("m%d", i))}
		if withPeers {
			args = append(args, "--raft-addr", rafts[i-1], "--peers", strings.Join(peers, ","))
		}
		return startProc(t, fmt.Sprintf("serve-%d", i), args...)
	}
	ready := func(p *proc) {
		t.Helper()
		waitFor(t, 60*time.Second, p.name+" ready", func() (bool, string) {
			return strings.Contains(p.out.String(), "shoal: ready"), p.out.String()
		})
	}
	p1 := serve(1, true)
	want := fmt.Sprintf("waiting for a quorum (2 of 3 replicas): no answer from replica 2 at %s, replica 3 at %s", rafts[1], rafts[2])
	waitFor(t, 30*time.Second, "waiting line", func() (bool, string) {
		return strings.Contains(p1.out.String(), want), p1.out.String()
	})
	p2 := serve(2, true)
	ready(p1)
	ready(p2)
	if out := p1.out.String(); strings.Contains(out, "transport") || strings.Count(out, "waiting for a quorum") > 2 {
		t.Fatalf("noisy wait:\n%s", out)
	}
	p1.stop(t)
	p2.stop(t)

	p1, p2 = serve(1, false), serve(2, false)
	ready(p1)
	ready(p2)
	if !strings.Contains(p1.out.String(), "raft="+rafts[0]) {
		t.Fatalf("restart without flags took another address:\n%s", p1.out.String())
	}
}

// `shoal version` names the commit the binary was built from: from the
// VCS stamp of go build (forced on here: this machine's GOFLAGS turn it
// off), or from -X main.commit as make build passes it.
func TestVersionNamesCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	rev, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		t.Skip("not in a git checkout:", err)
	}
	head := strings.TrimSpace(string(rev))
	dir := t.TempDir()
	for name, flags := range map[string][]string{
		"vcs":     {"-buildvcs=true"},
		"ldflags": {"-ldflags=-X main.version=v9.9.9 -X main.commit=" + head},
	} {
		bin := filepath.Join(dir, name)
		if out, err := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, ".")...).CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", flags, err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		re := `^shoal \S+ \(commit ` + head + `(, modified)?\)\n$`
		if name == "ldflags" {
			re = `^shoal v9\.9\.9 \(commit ` + head + `\)\n$`
		}
		if !regexp.MustCompile(re).Match(out) {
			t.Fatalf("%s build: version line %q, want %s", name, out, re)
		}
	}
}
