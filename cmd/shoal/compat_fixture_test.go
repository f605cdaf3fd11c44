package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
)

// An old data directory: scripts/make-compat-fixture.sh builds the binary
// at an older commit, runs it as one replica (--insecure, two service
// groups) with one agent, writes state through its CLI and API, stops both
// and packs their data directories, with what the old API answered just
// before the stop (expect.json), as testdata/compat-COMMIT.tar.gz.
// TestOldDataDirStarts starts the current binary on it.

var makeCompatFixture = flag.String("make-compat-fixture", "",
	"write testdata/compat-COMMIT.tar.gz from the binary built at COMMIT (scripts/make-compat-fixture.sh)")

// compatRaftAddr is the fixture replica's Raft address. The data
// directory records it, so every start of the fixture uses it; a
// loopback address other than 127.0.0.1 keeps it out of the free ports
// other tests take.
const compatRaftAddr = "127.77.0.1:7101"

// compatMarker begins every task command of the fixture, so the
// generator can stop the processes the old agent left running.
const compatMarker = "77310"

// compatExpect is what the old binary's API answered just before it
// stopped (raw bodies, decoded by the test with today's types).
type compatExpect struct {
	Commit   string                     `json:"commit"`
	Services json.RawMessage            `json:"services"`
	Tasks    map[string]json.RawMessage `json:"tasks"` // by service name
	Nodes    json.RawMessage            `json:"nodes"`
	Networks json.RawMessage            `json:"networks"`
	Settings json.RawMessage            `json:"settings"`
	Status   json.RawMessage            `json:"status"`
	// RequestID is the ID of a write sent with X-Shoal-Request-Id (it
	// created service RequestService) after the snapshots.
	RequestID      string `json:"request_id"`
	RequestService string `json:"request_service"`
	// Snapshots lists the snapshot directories the data directory held.
	Snapshots []string `json:"snapshots"`
	StopLine  string   `json:"stop_line"`
}

func TestMakeCompatFixture(t *testing.T) {
	rev := *makeCompatFixture
	if rev == "" {
		t.Skip("writes the fixture only when asked: scripts/make-compat-fixture.sh COMMIT")
	}
	work := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The old binary, from the commit's tree.
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %q | tar -x -C %q", root, rev, src)).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	old := filepath.Join(work, "shoal-old")
	build := exec.Command("go", "build", "-o", old, "./cmd/shoal")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at %s: %v\n%s", rev, err, out)
	}

	data := filepath.Join(work, "data")
	api := freeAddr(t)
	killLeftovers(t, "sleep "+compatMarker)
	srv := &proc{name: "old-serve", bin: old, args: []string{"serve", "--insecure", "--id", "1", "--groups", "2",
		"--raft-addr", compatRaftAddr, "--api-addr", api, "--data-dir", filepath.Join(data, "m1"),
		"--raft-log-level", "critical", "--sync-interval", "2s"}}
	srv.start(t)
	t.Cleanup(srv.kill)
	waitFor(t, 30*time.Second, "old manager ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "shoal: ready"), srv.out.String()
	})
	agent := &proc{name: "old-agent", bin: old, args: []string{"agent", "--insecure", "--join", api,
		"--data-dir", filepath.Join(data, "a1"), "--hostname", "compat-node", "--label", "zone=a", "--label", "disk=ssd"}}
	agent.start(t)
	t.Cleanup(agent.kill)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(old, args...)
		cmd.Env = append(os.Environ(), "SHOAL_ADDR="+api, "SHOAL_TLS_DIR=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("old shoal %s: %v\n%s\n--- serve\n%s\n--- agent\n%s", strings.Join(args, " "), err, out, srv.out, agent.out)
		}
		return string(out)
	}
	waitFor(t, 30*time.Second, "old agent joined", func() (bool, string) {
		out := run("node", "ls")
		return strings.Contains(out, "Ready"), out
	})

	hc := &http.Client{Timeout: 20 * time.Second}
	var nodes client.List[client.Node]
	getJSON(t, hc, api, "/v1/nodes", &nodes)
	if len(nodes.Items) != 1 {
		t.Fatalf("want one node, got %+v", nodes.Items)
	}
	nodeID := fmt.Sprint(nodes.Items[0].ID)
	nodePath := "/v1/nodes/" + nodeID

	// Before the snapshots: a network, settings, node labels, a
	// replicated service on the network with constraints and a previous
	// spec, a global service, a removed service.
	run("network", "create", "appnet", "--subnet", "10.77.0.0/26", "--reserve", "10.77.0.1-10.77.0.3")
	run("cluster", "update", "--task-history-limit", "3")
	run("node", "update", nodeID, "--label-add", "rack=r7")
	run("service", "create", "web", "--replicas", "3", "--network", "appnet", "--constraint", "node.labels.zone==a",
		"-e", "MODE=one", "--update-parallelism", "2", "--update-failure-action", "rollback", "--update-order", "start-first",
		"--update-delay", "1s", "--reserve-cpu", "0.05", "--reserve-memory", "1048576", "--restart-delay", "2s",
		"--stop-grace-period", "3s", "--", "sleep", compatMarker+"1")
	run("service", "update", "web", "-e", "MODE=two")
	run("service", "create", "mon", "--mode", "global", "--network", "appnet", "--constraint", "node.labels.disk==ssd",
		"--", "sleep", compatMarker+"2")
	run("service", "create", "gone", "--replicas", "2", "--", "sleep", compatMarker+"3")
	run("service", "rm", "gone")

	// Enough entries in every group for a snapshot (4,096 applied
	// entries; the old binary has no flag for fewer): a node's label
	// written again and again goes to the cluster group and, through its
	// outbox, to every service group.
	for i := 0; ; i++ {
		if i%200 == 0 {
			var st client.Status
			getJSON(t, hc, api, "/v1/status", &st)
			low := st.Groups[0].AppliedIndex
			for _, g := range st.Groups {
				low = min(low, g.AppliedIndex)
			}
			t.Logf("filler: %d label writes, lowest applied index %d", i, low)
			if low > 4096+300 {
				break
			}
		}
		body := fmt.Sprintf(`{"labels":{"zone":"a","disk":"ssd","rack":"r7","fill":"%d"}}`, i)
		if a := rawWrite(api, "POST", nodePath, json.RawMessage(body), "", 20*time.Second); a.status != 200 {
			t.Fatalf("label write %d: %d %s %v", i, a.status, a.body, a.err)
		}
	}

	// After the snapshots, in the log: an update that failed and paused
	// (its previous spec kept), a service created with a request ID and
	// fields the CLI has no flag for, more node labels and settings.
	run("service", "create", "slow", "--replicas", "2", "--restart-condition", "none", "--update-failure-action", "pause",
		"--", "sleep", compatMarker+"4")
	run("service", "update", "slow", "--detach", "--", "sh", "-c", "exit 3; sleep "+compatMarker+"4")
	const rid = "compat-create-db-1"
	db := json.RawMessage(`{"name":"db","replicas":2,"command":["sleep","` + compatMarker + `5"],"env":["DB=1"],"dir":"/tmp",
		"image":"registry.example/db:1","networks":["appnet"],"stop_grace":"4s",
		"restart":{"condition":"on-failure","delay":"3s","max_attempts":3,"window":"1m0s"},
		"update":{"parallelism":0,"failure_action":"continue","monitor":"2s","max_failure_ratio":0.5},
		"disconnect":{"lost_after":"30s","reconcile":"keep_original"},
		"placement":{"preferences":["node.labels.zone"],"max_replicas_per_node":2,"strategy":"binpack"},
		"reserve":{"cpu":20,"memory":2097152}}`)
	if a := rawWrite(api, "POST", "/v1/services", db, rid, 20*time.Second); a.status/100 != 2 {
		t.Fatalf("create db with a request ID: %d %s %v", a.status, a.body, a.err)
	}
	run("node", "update", nodeID, "--label-add", "tier=front")
	run("cluster", "update", "--task-history-limit", "4")
	waitFor(t, 60*time.Second, "the old cluster settles", func() (bool, string) {
		var l client.List[client.Service]
		getJSON(t, hc, api, "/v1/services", &l)
		var why []string
		for _, s := range l.Items {
			want := "converged"
			if s.Spec.Name == "slow" {
				want = "paused"
			}
			if s.Convergence.State != want {
				why = append(why, fmt.Sprintf("%s: %s %s", s.Spec.Name, s.Convergence.State, s.Convergence.Why))
			}
		}
		return len(why) == 0, strings.Join(why, "; ")
	})

	exp := compatExpect{Commit: rev, Tasks: map[string]json.RawMessage{}, RequestID: rid, RequestService: "db"}
	exp.Services = getRaw(t, hc, api, "/v1/services")
	var l client.List[client.Service]
	if err := json.Unmarshal(exp.Services, &l); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		exp.Tasks[s.Spec.Name] = getRaw(t, hc, api, "/v1/tasks?service="+s.Spec.Name)
	}
	exp.Nodes = getRaw(t, hc, api, "/v1/nodes")
	exp.Networks = getRaw(t, hc, api, "/v1/networks")
	exp.Settings = getRaw(t, hc, api, "/v1/cluster/settings")
	exp.Status = getRaw(t, hc, api, "/v1/status")

	// Stop the agent, then the manager, as an operator would.
	stopProc(t, agent)
	stopProc(t, srv)
	for _, line := range strings.Split(srv.out.String(), "\n") {
		if strings.HasPrefix(line, "shoal: stopped") {
			exp.StopLine = line
		}
	}
	if exp.StopLine == "" {
		t.Fatalf("the old manager printed no stop line:\n%s", srv.out)
	}
	exp.Snapshots = snapshotDirs(t, filepath.Join(data, "m1"))
	t.Logf("snapshots: %v", exp.Snapshots)
	if len(exp.Snapshots) < 3 {
		t.Fatalf("want a snapshot in each of the 3 groups, found %v", exp.Snapshots)
	}
	b, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "expect.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join("testdata", "compat-"+rev+".tar.gz")
	if err := packDir(data, dst); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", dst, fi.Size())
}

// stopProc sends SIGTERM and waits for the exit.
func stopProc(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM:\n%s", p.name, p.out)
	}
}

func getRaw(t *testing.T, hc *http.Client, api, path string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+api+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, b)
	}
	return json.RawMessage(b)
}

func getJSON(t *testing.T, hc *http.Client, api, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(getRaw(t, hc, api, path), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// snapshotDirs lists the snapshot directories dragonboat keeps under
// dir (snapshot-HEXINDEX, one parent per group), relative to dir.
func snapshotDirs(t *testing.T, dir string) []string {
	t.Helper()
	re := regexp.MustCompile(`^snapshot-[0-9A-F]{16}$`)
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && re.MatchString(d.Name()) {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// packDir writes dir's regular files and directories as a gzipped tar.
func packDir(dir, dst string) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() && !info.Mode().IsRegular() {
			return nil // sockets, locks held as links
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.ModTime = time.Unix(0, 0)
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// unpackFixture extracts a packDir archive into dir.
func unpackFixture(t *testing.T, src, dir string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("fixture entry %q leaves the directory", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, os.FileMode(hdr.Mode)|0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(name, b, os.FileMode(hdr.Mode)|0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
