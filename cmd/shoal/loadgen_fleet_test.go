package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/internal/netns"
	"shoal/loadgen/report"
)

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// The loadgen beyond one machine: three managers and two fleet workers on
// five hosts (network namespaces on one bridge, private addresses that
// exist only inside them), the coordinator in the test's own namespace on
// the bridge. The managers orphan a silent node's tasks after 8 s, so the
// run converges after a worker dies. Worker 2's clock is 3 s ahead (the
// namespaces share the host's clock): the coordinator must measure it and
// correct its observations' order by it. Half of the agents run in the
// coordinator's own processes. The managers' mass-expiry brake is off: it
// takes 10 nodes silent at once (a lost worker, or the fleet stopped at the
// end of a --join run) for an overloaded leader and holds them up for a
// minute. During the faults phase the test
// kills worker 2 for good and the cluster leader twice (restarting
// it 2 s later); the loadgen, told the orphan timeout, cuts agents off for
// at most half of it. The run must end with zero violations, converged, the
// lost worker counted, and each worker's agents, CPU and clock offset in
// the report.
func TestLoadgenFleetAcrossHosts(t *testing.T) {
	if os.Getenv("SHOAL_FLEET_NS") == "" {
		t.Skip("the loadgen across network namespaces runs with make loadgen-fleet (SHOAL_FLEET_NS=1): 40-60 s")
	}
	if err := netns.Check(); err != nil {
		t.Skip(err.Error())
	}
	shoalBin(t) // skips under -short; built before any host is made
	n := netns.New(t, 5)
	root := t.TempDir()
	var apis, peers []string
	for i := range 3 {
		h := n.Hosts[i]
		apis = append(apis, h.Addr.String()+":"+apiPort)
		peers = append(peers, fmt.Sprintf("%d=%s:%s", i+1, h.Addr, raftPort))
	}
	servers := make([]*proc, 3)
	for i := range 3 {
		h := n.Hosts[i]
		servers[i] = startProcOn(t, h, fmt.Sprintf("serve-%d", i+1), "serve", "--id", fmt.Sprint(i+1),
			"--raft-addr", h.Addr.String()+":"+raftPort, "--api-addr", apis[i], "--peers", strings.Join(peers, ","),
			"--data-dir", filepath.Join(root, fmt.Sprintf("m%d", i+1)), "--groups", "2",
			"--raft-log-level", "warning", "--insecure", "--orphan-timeout", "8s", "--mass-expiry-share", "0")
	}
	for _, s := range servers {
		waitFor(t, 60*time.Second, s.name+" ready", func() (bool, string) {
			return strings.Contains(s.out.String(), "shoal: ready"), s.out.String()
		})
	}

	coordAddr := n.Bridge.String() + ":7790"
	began := time.Now()
	tokFile, repFile := filepath.Join(root, "token"), filepath.Join(root, "run.json")
	const churn = 3 * time.Second
	lg := startProc(t, "loadgen", "loadgen", "--join", strings.Join(apis, ","), "--insecure",
		"--orphan-timeout", "8s", "--agents", "20", "--tasks", "200", "--services", "5", "--churn", churn.String(), "--faults", "10s",
		"--quiesce-timeout", "25s", "--crash-rate", "2", "--fleet-workers", "2", "--fleet-local", "10", "--fleet-listen", coordAddr,
		"--fleet-token-file", tokFile, "--json", repFile)
	var tok string
	waitFor(t, 30*time.Second, "the coordinator's token", func() (bool, string) {
		b, err := os.ReadFile(tokFile)
		tok = strings.TrimSpace(string(b))
		return err == nil && tok != "", lg.out.String()
	})
	workers := []*proc{
		startProcOn(t, n.Hosts[3], "worker-1", "loadgen", "fleet", "--coordinator", coordAddr, "--token", tok),
		startProcOn(t, n.Hosts[4], "worker-2", "loadgen", "fleet", "--coordinator", coordAddr, "--token", tok, "--clock-offset", "3s"),
	}
	defer func() {
		if t.Failed() {
			t.Logf("loadgen:\n%s", lg.out.String())
			for _, w := range workers {
				t.Logf("%s:\n%s", w.name, w.out.String())
			}
			for _, s := range servers {
				o := s.out.String()
				t.Logf("%s (its last 4 kB):\n%s", s.name, o[max(0, len(o)-4096):])
			}
			if ps, err := cliErr(t, apis[0], "node", "ls"); err == nil {
				t.Logf("node ls:\n%s", ps)
			}
		}
	}()

	// The ramp's end line; churn follows, then the faults.
	waitFor(t, 40*time.Second, "the ramp", func() (bool, string) {
		return strings.Contains(lg.out.String(), "tasks running"), lg.out.String()
	})
	faults := time.Now().Add(churn)
	at := func(d time.Duration) { time.Sleep(time.Until(faults.Add(d))) } // a schedule, not a wait for a condition
	killLeader := func() *proc {
		leader := -1
		waitFor(t, 10*time.Second, "a cluster leader", func() (bool, string) {
			for i := range apis {
				c, _ := client.New(apis[i])
				if c == nil || !servers[i].alive() {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				st, err := c.Status(ctx)
				cancel()
				if err == nil && len(st.Groups) > 0 && st.Groups[0].Leader > 0 {
					leader = int(st.Groups[0].Leader) - 1
					return servers[leader].alive(), ""
				}
			}
			return false, "no replica names a live leader"
		})
		s := servers[leader]
		s.kill()
		t.Logf("killed the leader, replica %d", leader+1)
		return s
	}
	at(time.Second)
	workers[1].kill()
	t.Logf("killed worker 2")
	at(2 * time.Second)
	s := killLeader()
	at(4 * time.Second)
	s.start(t)
	at(6 * time.Second)
	s = killLeader()
	at(8 * time.Second)
	s.start(t)

	select {
	case <-lg.exited:
	case <-time.After(90 * time.Second):
		_ = lg.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into its output
		select {
		case <-lg.exited:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("the loadgen did not end within 90s")
	}
	out := lg.out.String()
	t.Logf("the loadgen ran %.1fs", time.Since(began).Seconds())
	if lg.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("the loadgen failed (exit %d)", lg.cmd.ProcessState.ExitCode())
	}
	b, err := os.ReadFile(repFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Violations != 0 || !rep.Converged {
		t.Fatalf("violations %d, converged %t", rep.Violations, rep.Converged)
	}
	f := rep.Fleet
	if f == nil || len(f.Workers) != 2 || f.WorkersLost != 1 || f.LocalAgents != 10 {
		t.Fatalf("the report's fleet: %+v", f)
	}
	for i, w := range f.Workers {
		want := 0.0
		if w.Host == "" || w.Agents != 5 || w.CPUSeconds <= 0 {
			t.Errorf("worker %d: %+v", i+1, w)
		}
		if strings.Contains(w.Address, n.Hosts[4].Addr.String()+":") {
			want = 3000
			if !w.Lost {
				t.Errorf("the killed worker is not marked lost: %+v", w)
			}
		}
		if d := w.ClockOffsetMs - want; d < -50 || d > 50 || w.ClockErrorMs > 50 {
			t.Errorf("worker %d: clock offset %.1fms ± %.1fms, want %.0fms", i+1, w.ClockOffsetMs, w.ClockErrorMs, want)
		}
	}
	if !strings.Contains(out, "lost fleet worker") {
		t.Errorf("the loss of worker 2 was not said")
	}
	t.Logf("%s", out[strings.LastIndex(out, "fleet workers"):])
}

// The fleet workers run as a Shoal service: `serve --dev` runs two
// replicas of `shoal loadgen fleet`, which connect to a loadgen (with its
// own three managers) waiting for two workers; the run ends with zero
// violations, the workers in the report, and the workers' tasks complete.
func TestLoadgenFleetAsService(t *testing.T) {
	bin := shoalBin(t)
	dev := freeAddr(t)
	srv := startProc(t, "serve-dev", "serve", "--dev", "--api-addr", dev, "--data-dir", t.TempDir(), "--raft-log-level", "critical")
	waitFor(t, 30*time.Second, "dev mode ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "shoal: dev mode"), srv.out.String()
	})
	dir := t.TempDir()
	coord := freeAddr(t)
	tokFile, repFile := filepath.Join(dir, "token"), filepath.Join(dir, "run.json")
	lg := startProc(t, "loadgen", "loadgen", "--insecure", "--agents", "10", "--tasks", "60", "--services", "3",
		"--churn", "3s", "--faults", "4s", "--quiesce-timeout", "20s", "--fleet-workers", "2", "--fleet-listen", coord,
		"--fleet-token-file", tokFile, "--json", repFile)
	var tok string
	waitFor(t, 30*time.Second, "the coordinator's token", func() (bool, string) {
		b, err := os.ReadFile(tokFile)
		tok = strings.TrimSpace(string(b))
		return err == nil && tok != "", lg.out.String()
	})
	killLeftovers(t, tok)
	cli(t, dev, "service", "create", "lg-fleet", "--replicas", "2", "--restart-condition", "on-failure", "--detach",
		"--", bin, "loadgen", "fleet", "--coordinator", coord, "--token", tok)
	select {
	case <-lg.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("the loadgen did not end within 90s:\n%s", lg.out.String())
	}
	if code := lg.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the loadgen failed (exit %d):\n%s", code, lg.out.String())
	}
	b, err := os.ReadFile(repFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Violations != 0 || !rep.Converged || rep.Fleet == nil || len(rep.Fleet.Workers) != 2 || rep.Fleet.WorkersLost != 0 {
		t.Fatalf("report: violations %d, converged %t, fleet %+v\n%s", rep.Violations, rep.Converged, rep.Fleet, lg.out.String())
	}
	for _, w := range rep.Fleet.Workers {
		if w.Agents != 5 || w.CPUSeconds <= 0 {
			t.Errorf("worker %+v", w)
		}
	}
	waitFor(t, 30*time.Second, "the workers' tasks complete", func() (bool, string) {
		ps, _ := cliErr(t, dev, "service", "ps", "lg-fleet")
		return strings.Count(ps, "Complete") == 2, ps
	})
}
