package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The CLI against a real `shoal serve`, as the README shows it: without
// agents tasks stay pending and `ps` says why.
func TestCLIAgainstServe(t *testing.T) {
	api, dir := freeAddr(t), t.TempDir()
	srv := startProc(t, "serve", "serve", "--data-dir", dir, "--api-addr", api, "--groups", "2", "--raft-log-level", "critical")
	waitFor(t, 30*time.Second, "manager ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "shoal: ready"), srv.out.String()
	})
	// TLS is on by default: without the admin credential the CLI says so.
	if out, err := cliErr(t, api, "service", "ls"); err == nil || !strings.Contains(out, "--tls-dir") {
		t.Fatalf("without --tls-dir: %v %q", err, out)
	}
	cliTLSDirs.Store(api, filepath.Join(dir, "tls"))
	// The timers: serve's defaults, and the task history limit set as a
	// cluster setting.
	if out := cli(t, api, "status"); !strings.Contains(out, "task history limit: 5 (cluster setting)") ||
		!strings.Contains(out, "failover grace: 30s, orphan timeout: 24h0m0s") {
		t.Fatalf("status does not show the timers:\n%s", out)
	}
	if out, err := cliErr(t, api, "cluster", "update", "--task-history-limit", "101"); err == nil || !strings.Contains(out, "--task-history-limit 101 is out of range: give 1 to 100") {
		t.Fatalf("limit 101: %v %q", err, out)
	}
	if out := cli(t, api, "cluster", "update", "--task-history-limit", "3"); strings.TrimSpace(out) != "task history limit: 3" {
		t.Fatalf("cluster update printed %q", out)
	}
	if out := cli(t, api, "status"); !strings.Contains(out, "task history limit: 3 (cluster setting)") {
		t.Fatalf("status after the update:\n%s", out)
	}
	if out := cli(t, api, "service", "create", "web", "--replicas", "3", "--detach", "--", "sleep", "1000"); strings.TrimSpace(out) != "web" {
		t.Fatalf("create printed %q", out)
	}
	var svcs []struct {
		Spec struct {
			Name    string   `json:"name"`
			Command []string `json:"command"`
		} `json:"spec"`
		Desired int `json:"desired"`
	}
	if err := json.Unmarshal([]byte(cli(t, api, "service", "ls", "--format", "json")), &svcs); err != nil ||
		len(svcs) != 1 || svcs[0].Spec.Name != "web" || svcs[0].Desired != 3 || strings.Join(svcs[0].Spec.Command, " ") != "sleep 1000" {
		t.Fatalf("ls --format json: %+v, %v", svcs, err)
	}
	waitFor(t, 10*time.Second, "pending tasks explained", func() (bool, string) {
		out, _ := cliErr(t, api, "service", "ps", "web")
		return strings.Count(out, "Pending") == 3 && strings.Count(out, "no suitable node") == 3, out
	})
	if out, err := cliErr(t, api, "service", "create", "web", "--detach", "--", "true"); err == nil || !strings.Contains(out, `service "web" already exists`) {
		t.Fatalf("duplicate create: %v %q", err, out)
	}
	cli(t, api, "service", "rm", "web")
	waitFor(t, 10*time.Second, "service removed", func() (bool, string) {
		out, _ := cliErr(t, api, "service", "ls", "-q")
		return strings.TrimSpace(out) == "", out
	})
	if out, err := cliErr(t, "127.0.0.1:1", "service", "ls"); err == nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "cannot reach the manager") {
		t.Fatalf("unreachable manager: %v %q", err, out)
	}
}
