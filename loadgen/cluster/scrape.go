package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Metrics are the lines of a replica's /metrics the loadgen reads.
type Metrics struct {
	HeapInuse uint64
	HeapLive  uint64            // go_gc_heap_live_bytes: live at the last collection
	Tasks     map[string]int    // shoal_tasks by state
	Nodes     map[string]int    // shoal_nodes by status
	Applied   map[string]uint64 // shoal_group_applied_index by group
	// Proposals and Commands are the entries this replica proposed per
	// group and the commands they carried (counters since it started).
	Proposals map[string]uint64
	Commands  map[string]uint64
	// Terms is the Raft term per group (shoal_raft_term): each election
	// raises it.
	Terms map[string]uint64
	// AgentCalls counts the agent calls this replica answered since it
	// started, per endpoint (shoal_http_requests_total of the agent_*
	// endpoints, every status code), e.g. "heartbeat", "assignments".
	AgentCalls map[string]uint64
	// CPUSeconds is the CPU time the replica's process has used since it
	// started (process_cpu_seconds_total), and Started when that was
	// (process_start_time_seconds): a restarted replica counts from zero.
	CPUSeconds float64
	Started    string
}

// label returns the value of label `name` in a metric line's labels.
func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// Scrape reads addr's /metrics.
func (a *Access) Scrape(ctx context.Context, addr string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := Metrics{Tasks: map[string]int{}, Nodes: map[string]int{}, Applied: map[string]uint64{},
		Proposals: map[string]uint64{}, Commands: map[string]uint64{}, Terms: map[string]uint64{},
		AgentCalls: map[string]uint64{}}
	req, err := http.NewRequestWithContext(ctx, "GET", a.url(addr, "/metrics"), nil)
	if err != nil {
		return m, err
	}
	resp, err := a.httpClient().Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return m, fmt.Errorf("cluster: %s/metrics: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		name, val := line[:sp], line[sp+1:]
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch {
		case name == "go_memstats_heap_inuse_bytes":
			m.HeapInuse = uint64(f)
		case name == "go_gc_heap_live_bytes":
			m.HeapLive = uint64(f)
		case name == "process_cpu_seconds_total":
			m.CPUSeconds = f
		case name == "process_start_time_seconds":
			m.Started = val
		case strings.HasPrefix(name, "shoal_tasks{"):
			m.Tasks[label(name, "state")] = int(f)
		case strings.HasPrefix(name, "shoal_nodes{"):
			m.Nodes[label(name, "status")] = int(f)
		case strings.HasPrefix(name, "shoal_group_applied_index{"):
			m.Applied[label(name, "group")] = uint64(f)
		case strings.HasPrefix(name, "shoal_group_proposals_total{"):
			m.Proposals[label(name, "group")] = uint64(f)
		case strings.HasPrefix(name, "shoal_group_proposed_commands_total{"):
			m.Commands[label(name, "group")] = uint64(f)
		case strings.HasPrefix(name, "shoal_raft_term{"):
			m.Terms[label(name, "group")] = uint64(f)
		case strings.HasPrefix(name, "shoal_http_requests_total{"):
			if ep, ok := strings.CutPrefix(label(name, "endpoint"), "agent_"); ok {
				m.AgentCalls[ep] += uint64(f)
			}
		}
	}
	return m, sc.Err()
}

// FetchProfile saves addr's /debug/pprof/PATH (e.g. "profile?seconds=20",
// "heap") to file.
func (a *Access) FetchProfile(ctx context.Context, addr, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", a.url(addr, "/debug/pprof/"+path), nil)
	if err != nil {
		return err
	}
	resp, err := a.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("cluster: %s/debug/pprof/%s: %s (start the managers with --pprof)", addr, path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
