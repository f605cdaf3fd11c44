package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/internal/taskref"
)

// Task IDs as `service ps` prints them against a real manager: short,
// different for every task of a service, and each found back by the
// shortest prefix no other task has, in either case; a prefix several
// tasks share, or none, is refused naming what the user typed.
func TestTaskIDsPrintShortAndResolveBack(t *testing.T) {
	api, dir := freeAddr(t), t.TempDir()
	srv := startProc(t, "serve", "serve", "--insecure", "--data-dir", dir, "--api-addr", api, "--groups", "2", "--raft-log-level", "critical")
	waitFor(t, 30*time.Second, "manager ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "shoal: ready"), srv.out.String()
	})
	const n = 64
	cli(t, api, "service", "create", "web", "--replicas", "64", "--detach", "--", "sleep", "1000")
	var short []string
	waitFor(t, 10*time.Second, "64 tasks", func() (bool, string) {
		out := cli(t, api, "service", "ps", "web", "-q")
		short = strings.Fields(out)
		return len(short) == n, out
	})
	whole := strings.Fields(cli(t, api, "service", "ps", "web", "-q", "--no-trunc"))
	var tasks []client.Task
	if err := json.Unmarshal([]byte(cli(t, api, "service", "ps", "web", "--format", "json")), &tasks); err != nil || len(tasks) != n {
		t.Fatalf("ps --format json: %d tasks, %v", len(tasks), err)
	}
	seen := map[string]bool{}
	for i, s := range short {
		if len(s) != taskref.ShortLen || seen[s] || !strings.HasPrefix(whole[i], s) || len(whole[i]) != taskref.FullLen {
			t.Fatalf("task %d prints %q (whole %q); seen before: %v", i, s, whole[i], seen[s])
		}
		seen[s] = true
	}
	// Each task by the shortest prefix that no other task has (upper case
	// for every other one), by its whole printed ID and by its decimal ID.
	for i, s := range whole {
		k := 1
		for ; k < len(s); k++ {
			shared := false
			for j, o := range whole {
				shared = shared || (j != i && strings.HasPrefix(o, s[:k]))
			}
			if !shared {
				break
			}
		}
		typed := s[:k]
		if i%2 == 1 {
			typed = strings.ToUpper(typed)
		}
		for _, ref := range []string{typed, tasks[i].ID} {
			out := cli(t, api, "service", "ps", ref, "-q")
			if strings.TrimSpace(out) != short[i] {
				t.Fatalf("ps %s printed %q, want %s", ref, out, short[i])
			}
		}
		if i > 4 { // the process start is what is slow; five tasks show it
			break
		}
	}
	// 64 IDs over 32 first characters: some first character is shared.
	firsts := map[byte]int{}
	for _, s := range short {
		firsts[s[0]]++
	}
	for c, count := range firsts {
		if count > 1 {
			out, err := cliErr(t, api, "service", "ps", string(c))
			if err == nil || !strings.Contains(out, `task ID "`+string(c)+`" is ambiguous`) {
				t.Fatalf("ps %c (%d tasks): %v\n%s", c, count, err, out)
			}
			break
		}
	}
	for _, bad := range []string{"web.1", "zzzzzzzzzzzzz"} {
		out, err := cliErr(t, api, "service", "ps", bad)
		if err == nil || !strings.Contains(out, `no service is named "`+bad+`" and no task ID begins with it`) {
			t.Fatalf("ps %s: %v\n%s", bad, err, out)
		}
	}
}

// A node is found by its ID, its hostname or a prefix of either that only
// it has; exact names win over prefixes, and ambiguity is refused.
func TestNodeResolvesByIDHostnameOrPrefix(t *testing.T) {
	nodes := []client.Node{{ID: 1, Name: "web-1"}, {ID: 2, Name: "web-10"}, {ID: 12, Name: "db"}}
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/nodes" {
			_ = json.NewEncoder(w).Encode(client.List[client.Node]{Items: nodes})
			return
		}
		asked = append(asked, r.URL.Path)
		id := strings.TrimPrefix(r.URL.Path, "/v1/nodes/")
		if r.Method == "DELETE" {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(client.ErrorBody{Code: client.CodeConflict,
				Error: "node " + id + " is ready; only a down node can be removed"})
			return
		}
		for _, n := range nodes {
			if nodeID(n) == id {
				_ = json.NewEncoder(w).Encode(n)
				return
			}
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--addr", srv.URL, "--tls-dir", ""))
		err := root.Execute()
		if err != nil {
			out.WriteString(err.Error())
		}
		return out.String(), err
	}
	for typed, want := range map[string]string{"1": "/v1/nodes/1", "web-1": "/v1/nodes/1", "web-10": "/v1/nodes/2",
		"d": "/v1/nodes/12", "12": "/v1/nodes/12", "2": "/v1/nodes/2"} {
		asked = nil
		if out, err := run("node", "inspect", typed); err != nil || len(asked) != 1 || asked[0] != want {
			t.Errorf("node inspect %s asked %v, want %s: %v\n%s", typed, asked, want, err, out)
		}
	}
	for typed, want := range map[string]string{
		"web": `node "web" is ambiguous: it begins 1 (web-1), 2 (web-10)`,
		"x":   `node "x" does not exist`,
	} {
		if out, err := run("node", "inspect", typed); err == nil || !strings.Contains(out, want) {
			t.Errorf("node inspect %s: %v\n%s", typed, err, out)
		}
	}
	// The manager's refusal names the node by ID; the CLI adds the name
	// the user typed, when that was not the ID.
	for typed, want := range map[string]string{
		"db": `node "db": node 12 is ready; only a down node can be removed`,
		"12": `node 12 is ready; only a down node can be removed`,
	} {
		if out, err := run("node", "rm", typed); err == nil || strings.TrimSpace(out) != want {
			t.Errorf("node rm %s: %v\n%s", typed, err, out)
		}
	}
}
