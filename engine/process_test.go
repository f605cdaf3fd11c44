package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/freeport"
	"shoal/route"
)

// Three `shoal serve` processes on loopback form one cluster from their
// flags: they elect leaders, a service created through one of them shows up
// on all three, and on SIGTERM each exits cleanly with the same group hashes.
func TestThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "shoal")
	build := exec.Command("go", "build", "-o", bin, "shoal/cmd/shoal")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var addrs, peers, apis []string
	for i := 1; i <= 3; i++ {
		a, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		api, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		addrs, apis = append(addrs, a), append(apis, api)
		peers = append(peers, fmt.Sprintf("%d=%s", i, a))
	}
	type proc struct {
		cmd    *exec.Cmd
		out    *syncBuffer
		status string
		exited chan error
	}
	procs := make([]*proc, 3)
	for i := range procs {
		p := &proc{out: &syncBuffer{}, status: filepath.Join(dir, fmt.Sprintf("status-%d.json", i+1)), exited: make(chan error, 1)}
		args := []string{"serve", "--id", fmt.Sprint(i + 1), "--raft-addr", addrs[i],
			"--peers", strings.Join(peers, ","), "--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", i+1)),
			"--groups", "2", "--status-file", p.status, "--raft-log-level", "critical", "--api-addr", apis[i],
			"--insecure"} // a Raft test: plain HTTP for its API client
		p.cmd = exec.Command(bin, args...)
		p.cmd.Dir = dir // never pick up a dragonboat-soft-settings.json
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.exited <- p.cmd.Wait() }()
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				<-p.exited
			}
		})
		procs[i] = p
	}

	webGroup := route.ServiceGroup("web", 2)
	eventually(t, 60*time.Second, func() (bool, string) {
		resp, err := http.Post("http://"+apis[0]+"/v1/services", "application/json",
			strings.NewReader(`{"name":"web","replicas":3,"command":["sleep","1000"]}`))
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusConflict, resp.Status
	})
	eventually(t, 60*time.Second, func() (bool, string) {
		var docs []processStatus
		for _, p := range procs {
			var doc processStatus
			b, err := os.ReadFile(p.status)
			if err != nil || json.Unmarshal(b, &doc) != nil || len(doc.Groups) != 3 {
				return false, fmt.Sprintf("status file %s not written yet; output so far:\n%s", p.status, p.out.String())
			}
			docs = append(docs, doc)
		}
		for _, d := range docs {
			if w := d.Groups[webGroup]; w.Services != 1 || w.Tasks != 3 {
				return false, fmt.Sprintf("replica %d: group %d holds %d services, %d tasks", d.Replica, webGroup, w.Services, w.Tasks)
			}
			for g, gs := range d.Groups {
				if gs.Leader == 0 || gs.Leader != docs[0].Groups[g].Leader || gs.Hash != docs[0].Groups[g].Hash {
					return false, fmt.Sprintf("group %d: replicas disagree: %+v vs %+v", g, gs, docs[0].Groups[g])
				}
			}
		}
		return true, ""
	})

	// One after another. A replica stopped later may have applied more (a
	// new leader's duties write after a hand-over), so per group the index
	// may only grow in stop order, and equal indexes must hold equal states.
	var lines []string
	for i, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.exited:
			if err != nil {
				t.Fatalf("replica %d exited with %v:\n%s", i+1, err, p.out.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("replica %d did not exit on SIGTERM:\n%s", i+1, p.out.String())
		}
		var line string
		for _, l := range strings.Split(p.out.String(), "\n") {
			if strings.HasPrefix(l, "shoal: stopped ") {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("replica %d printed no stop line:\n%s", i+1, p.out.String())
		}
		lines = append(lines, line[strings.Index(line, " g0="):])
	}
	prev := map[string][2]string{} // group → index, hash of the replica stopped before
	for i, l := range lines {
		for _, f := range strings.Fields(l) {
			g, rest, _ := strings.Cut(f, "=")
			idx, hash, _ := strings.Cut(rest, "/")
			n, err := strconv.ParseUint(idx, 10, 64)
			if err != nil {
				t.Fatalf("stop line %q: %v", l, err)
			}
			if p, ok := prev[g]; ok {
				pn, _ := strconv.ParseUint(p[0], 10, 64)
				if n < pn || (n == pn && hash != p[1]) {
					t.Fatalf("replica %d stopped with %s=%s after one with %s=%s/%s:\n%s", i+1, g, rest, g, p[0], p[1], strings.Join(lines, "\n"))
				}
			}
			prev[g] = [2]string{idx, hash}
		}
	}
}

type processStatus struct {
	Replica uint64 `json:"replica"`
	Groups  []struct {
		Leader   uint64 `json:"leader"`
		Hash     string `json:"hash"`
		Services int    `json:"services"`
		Tasks    int    `json:"tasks"`
	} `json:"groups"`
}

// syncBuffer is a bytes.Buffer safe for a process writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
