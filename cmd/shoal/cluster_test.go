package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCluster is three `shoal serve` processes and some `shoal agent`
// processes on loopback.
type testCluster struct {
	t       *testing.T
	apis    []string
	servers []*proc
	agents  []*proc
}

func startTestCluster(t *testing.T, agents int) *testCluster {
	c := &testCluster{t: t}
	var peers []string
	var rafts []string
	for i := 1; i <= 3; i++ {
		r := freeAddr(t)
		rafts = append(rafts, r)
		c.apis = append(c.apis, freeAddr(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i, r))
	}
	root := t.TempDir()
	// With TLS, as in production: replica 1 creates the cluster CA, the
	// others join with the manager token, agents with the worker token.
	tlsDir := filepath.Join(root, "m1", "tls")
	for _, a := range c.apis {
		cliTLSDirs.Store(a, tlsDir)
	}
	serve := func(i int, extra ...string) {
		args := append([]string{"serve", "--id", fmt.Sprint(i),
			"--raft-addr", rafts[i-1], "--api-addr", c.apis[i-1], "--peers", strings.Join(peers, ","),
			"--data-dir", filepath.Join(root, fmt.Sprintf("m%d", i)), "--groups", "2",
			"--raft-log-level", "critical", "--sync-interval", "2s"}, extra...)
		c.servers = append(c.servers, startProc(t, fmt.Sprintf("serve-%d", i), args...))
	}
	serve(1)
	var managerToken string
	waitFor(t, 30*time.Second, "manager 1 answers", func() (bool, string) {
		out, err := cliErr(t, c.apis[0], "token", "manager", "-q")
		managerToken = strings.TrimSpace(out)
		return err == nil, out + c.servers[0].out.String()
	})
	for i := 2; i <= 3; i++ {
		serve(i, "--join", c.apis[0], "--token", managerToken)
	}
	for i, s := range c.servers {
		waitFor(t, 60*time.Second, fmt.Sprintf("manager %d ready", i+1), func() (bool, string) {
			return strings.Contains(s.out.String(), "shoal: ready"), s.out.String()
		})
	}
	workerToken := strings.TrimSpace(cli(t, c.apis[1], "token", "worker", "-q"))
	for i := 1; i <= agents; i++ {
		c.agents = append(c.agents, startProc(t, fmt.Sprintf("agent-%d", i), "agent", "--join", strings.Join(c.apis, ","),
			"--data-dir", filepath.Join(root, fmt.Sprintf("a%d", i)), "--hostname", fmt.Sprintf("node-%d", i),
			"--token", workerToken))
	}
	waitFor(t, 30*time.Second, "agents joined", func() (bool, string) {
		out, _ := cliErr(t, c.api(), "node", "ls") // a replica that just started may not answer yet
		return strings.Count(out, "Ready") == agents, out
	})
	return c
}

// api returns the address of a live manager that answers (a replica that
// just restarted may not have loaded its groups yet), else of any live one.
func (c *testCluster) api() string {
	live := ""
	for i, s := range c.servers {
		select {
		case <-s.exited:
			continue
		default:
		}
		if live == "" {
			live = c.apis[i]
		}
		hc := http.Client{Timeout: 2 * time.Second}
		if resp, err := hc.Get("http://" + c.apis[i] + "/v1/nodes"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c.apis[i]
			}
		}
	}
	if live == "" {
		c.t.Fatal("no manager is running")
	}
	return live
}

// running waits until service has n running tasks (and none pending).
func (c *testCluster) running(service string, n int, timeout time.Duration) []taskRow {
	c.t.Helper()
	var rows []taskRow
	waitFor(c.t, timeout, fmt.Sprintf("%s: %d running", service, n), func() (bool, string) {
		rows = psJSON(c.t, c.api(), service)
		return countState(rows, "running") == n && countState(rows, "pending") == 0, fmt.Sprintf("%+v", rows)
	})
	return rows
}

func (c *testCluster) dump() string {
	var b strings.Builder
	for _, p := range append(append([]*proc{}, c.servers...), c.agents...) {
		fmt.Fprintf(&b, "--- %s\n%s\n", p.name, p.out.String())
	}
	return b.String()
}

// Three managers and two agents as processes: services of real processes
// run, scale, fail, get rejected and are removed; processes are checked
// by pid.
func TestClusterRunsProcesses(t *testing.T) {
	c := startTestCluster(t, 2)
	defer func() {
		if t.Failed() {
			t.Log(c.dump())
		}
	}()
	const marker = "sleep 7771"
	killLeftovers(t, marker)
	cli(t, c.api(), "service", "create", "web", "--replicas", "3", "--", "sleep", "7771")
	c.running("web", 3, 30*time.Second)
	waitFor(t, 10*time.Second, "three sleep processes", func() (bool, string) {
		n := len(pidsOf(marker))
		return n == 3, fmt.Sprint(n, " processes")
	})

	cli(t, c.api(), "service", "scale", "web=5")
	c.running("web", 5, 30*time.Second)
	cli(t, c.api(), "service", "scale", "web=2")
	c.running("web", 2, 30*time.Second)
	waitFor(t, 20*time.Second, "scaled-down processes stopped", func() (bool, string) {
		n := len(pidsOf(marker))
		return n == 2, fmt.Sprint(n, " processes")
	})

	// A task that exits 3 is failed with its exit code, and restarted.
	cli(t, c.api(), "service", "create", "exit3", "--detach", "--restart-delay", "100ms", "--", "sh", "-c", "sleep 0.2; exit 3")
	waitFor(t, 30*time.Second, "exit 3 seen and restarted", func() (bool, string) {
		rows := psJSON(t, c.api(), "exit3")
		failed := 0
		for _, r := range rows {
			if r.State == "failed" && r.ExitCode == 3 {
				failed++
			}
		}
		return failed >= 2, fmt.Sprintf("%+v", rows)
	})
	cli(t, c.api(), "service", "rm", "exit3")

	// A command that does not exist is rejected with the reason.
	cli(t, c.api(), "service", "create", "nope", "--detach", "--", "/no/such/command")
	waitFor(t, 30*time.Second, "rejected", func() (bool, string) {
		for _, r := range psJSON(t, c.api(), "nope") {
			if r.State == "rejected" && strings.Contains(r.Message, "/no/such/command") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", psJSON(t, c.api(), "nope"))
	})
	cli(t, c.api(), "service", "rm", "nope")

	// Draining a node moves its tasks to the other.
	rows := c.running("web", 2, 10*time.Second)
	drained := fmt.Sprint(rows[0].Node)
	cli(t, c.api(), "node", "update", drained, "--availability", "drain")
	waitFor(t, 30*time.Second, "tasks off the drained node", func() (bool, string) {
		rows := psJSON(t, c.api(), "web")
		for _, r := range rows {
			if r.State == "running" && r.Desired == "running" && fmt.Sprint(r.Node) == drained {
				return false, fmt.Sprintf("%+v", rows)
			}
		}
		return countState(rows, "running") == 2, fmt.Sprintf("%+v", rows)
	})
	cli(t, c.api(), "node", "update", drained, "--availability", "active")

	// A rolling update changes every process's environment.
	cli(t, c.api(), "service", "update", "web", "--env", "COLOR=blue", "--update-parallelism", "1")
	rows = c.running("web", 2, 60*time.Second)
	for _, r := range rows {
		if r.State == "running" && r.Desired == "running" {
			pids := pidsOf(marker)
			if len(pids) != 2 {
				t.Fatalf("after the update: %d processes", len(pids))
			}
		}
	}
	for _, pid := range pidsOf(marker) {
		env, _ := readEnviron(pid)
		if !strings.Contains(env, "COLOR=blue") {
			t.Fatalf("process %d runs without the updated environment: %q", pid, env)
		}
	}

	cli(t, c.api(), "service", "rm", "web")
	waitFor(t, 30*time.Second, "every process stopped", func() (bool, string) {
		n := len(pidsOf(marker))
		return n == 0, fmt.Sprint(n, " processes left")
	})
}
