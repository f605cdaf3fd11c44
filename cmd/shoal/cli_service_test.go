package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
)

// `service ls` shows the tasks running of any version out of those desired
// and, while an update is not finished or the versions differ, how many run
// the current version and where the update stands: a paused update whose
// old tasks still serve is not shown as 0/3.
func TestServiceLsShowsOldVersionTasksAndUpdateState(t *testing.T) {
	svc := func(name string, version uint32, running, any, desired int, update string) client.Service {
		s := client.Service{ID: version, SpecVersion: version, Running: running, RunningAny: any,
			Desired: desired, Update: client.UpdateStatus{State: update}}
		s.Spec.Name, s.Spec.Mode, s.Spec.Command = name, "replicated", []string{"sleep", "1000"}
		return s
	}
	services := []client.Service{
		svc("web", 2, 0, 2, 3, "paused"),
		svc("api", 3, 1, 3, 3, "updating"),
		svc("db", 4, 3, 3, 3, "rollback_completed"),
		svc("cache", 5, 1, 2, 2, "rollback_paused"),
		svc("queue", 1, 2, 2, 2, ""),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/services" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(client.List[client.Service]{Items: services})
	}))
	defer srv.Close()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"service", "ls", "--addr", srv.URL, "--tls-dir", ""})
	if err := root.Execute(); err != nil {
		t.Fatalf("service ls: %v\n%s", err, out.String())
	}
	want := map[string]string{
		"web":   "2/3 (0 at v2, update paused)",
		"api":   "3/3 (1 at v3, updating)",
		"db":    "3/3 ",
		"cache": "2/2 (1 at v5, rollback paused)",
		"queue": "2/2 ",
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			rows[f[0]] = l + " "
		}
	}
	for name, cell := range want {
		if !strings.Contains(rows[name], " "+cell) {
			t.Errorf("%s: REPLICAS want %q, row %q in\n%s", name, cell, rows[name], out.String())
		}
	}
}

// A paused update is reported as paused, with the old version's tasks still
// serving, never as converged: the CLI prints what the manager says (the
// rule itself is tested where the manager renders it, api's
// TestRenderServiceConvergence).
func TestPausedUpdateIsNotReportedConverged(t *testing.T) {
	s := client.Service{SpecVersion: 2, Running: 0, RunningAny: 2, Desired: 3,
		Update: client.UpdateStatus{State: "paused", Message: "update paused due to failure of task 4 (failed)"},
		Convergence: client.Convergence{State: client.UpdatePaused,
			Why: "the update of web paused with 2/3 running, 0 at v2: update paused due to failure of task 4 (failed)"}}
	s.Spec.Name = "web"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := newRoot()
	cmd.SetOut(&out)
	cmd.SetContext(context.Background())
	err = converge(cmd, c, "web", "", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "the update of web paused with 2/3 running, 0 at v2: update paused due to failure") {
		t.Fatalf("converge: %v", err)
	}
	if strings.Contains(out.String(), "converged") {
		t.Fatalf("a paused update printed %q", out.String())
	}
}

// A service's "id" counts within its group, so services of different
// groups share it (a new cluster's first services are all 1): a column of
// those IDs would name no service. Every row of `service ls` begins with
// something that names one service, as every command takes it.
func TestServiceLsRowsNameOneServiceEach(t *testing.T) {
	var services []client.Service
	for g, name := range []string{"web", "api", "db"} {
		s := client.Service{ID: 1, Group: g + 3, SpecVersion: 1, Running: 1, RunningAny: 1, Desired: 1}
		s.Spec.Name, s.Spec.Mode, s.Spec.Command = name, "replicated", []string{"sleep", "1000"}
		services = append(services, s)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(client.List[client.Service]{Items: services})
	}))
	defer srv.Close()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"service", "ls", "--addr", srv.URL, "--tls-dir", ""})
	if err := root.Execute(); err != nil {
		t.Fatalf("service ls: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s", out.String())
	}
	for i, l := range lines[1:] {
		if first := strings.Fields(l)[0]; first != services[i].Spec.Name {
			t.Errorf("row %q begins with %q, not the service's name", l, first)
		}
	}
}

// A wait that times out during a rolling update says what the manager
// says (the old version's tasks still serve), not a bare "0/3 running"
// that `service ls` contradicts with 2/3.
func TestConvergeTimeoutSaysWhatRuns(t *testing.T) {
	const why = "the update to v2 is under way: 0/3 running at v2, 2 of any version"
	s := client.Service{SpecVersion: 2, Running: 0, RunningAny: 2, Desired: 3,
		Update:      client.UpdateStatus{State: "updating"},
		Convergence: client.Convergence{State: client.Converging, Why: why}}
	s.Spec.Name = "web"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" { // nothing happens until the wait ends
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cmd := newRoot()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetContext(context.Background())
	err = converge(cmd, c, "web", "", 300*time.Millisecond)
	want := "web did not converge within 300ms: " + why + "; see `shoal service ps web`"
	if err == nil || err.Error() != want {
		t.Fatalf("converge: %v\nwant: %s", err, want)
	}
}

// `service update NAME` with nothing to change is refused without a
// write: it used to store the same spec again and then wait, up to the
// timeout, for whatever the service was doing.
func TestServiceUpdateWithNothingToChange(t *testing.T) {
	s := client.Service{SpecVersion: 1, Running: 1, RunningAny: 1, Desired: 1,
		Convergence: client.Convergence{State: client.Converging, Why: "0/1 running at v1"}}
	s.Spec.Name, s.Spec.Mode, s.Spec.Command = "web", "replicated", []string{"sleep", "1000"}
	writes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes++
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	}))
	defer srv.Close()
	for _, args := range [][]string{{"web"}, {"web", "--detach"}, {"web", "--timeout", "1s"}} {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"service", "update", "--addr", srv.URL, "--tls-dir", ""}, args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "nothing to change") {
			t.Errorf("service update %v: %v\n%s", args, err, out.String())
		}
	}
	if writes != 0 {
		t.Errorf("%d writes sent", writes)
	}
	// A flag, or a command, is something to change.
	for _, args := range [][]string{{"web", "--detach", "--replicas", "2"}, {"web", "--detach", "--", "sleep", "5"}} {
		root := newRoot()
		root.SetOut(&bytes.Buffer{})
		root.SetArgs(append([]string{"service", "update", "--addr", srv.URL, "--tls-dir", ""}, args...))
		if err := root.Execute(); err != nil {
			t.Errorf("service update %v: %v", args, err)
		}
	}
	if writes != 2 {
		t.Errorf("%d writes sent for two changes", writes)
	}
}

// `service scale a=2 b=x` checks every argument before it scales any:
// a mistake in the last one used to leave the first ones scaled.
func TestServiceScaleChecksEveryArgumentFirst(t *testing.T) {
	writes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes++
		}
		s := client.Service{SpecVersion: 1, Desired: 2, Running: 2, RunningAny: 2, Convergence: client.Convergence{State: client.Converged}}
		s.Spec.Name, s.Spec.Mode = "web", "replicated"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	}))
	defer srv.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"web=2", "api=x"}, `"api=x": give NAME=REPLICAS, REPLICAS a whole number, 0 or more`},
		{[]string{"web=2", "api=-1"}, `"api=-1": give NAME=REPLICAS, REPLICAS a whole number, 0 or more`},
		{[]string{"web=2", "api"}, `"api": give NAME=REPLICAS, REPLICAS a whole number, 0 or more`},
		{[]string{"web=2", "=3"}, `"=3": give NAME=REPLICAS, REPLICAS a whole number, 0 or more`},
	} {
		root := newRoot()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"service", "scale", "--detach", "--addr", srv.URL, "--tls-dir", ""}, c.args...))
		if err := root.Execute(); err == nil || err.Error() != c.want {
			t.Errorf("scale %v: %v, want %s", c.args, err, c.want)
		}
	}
	if writes != 0 {
		t.Errorf("%d services scaled before the bad argument was seen", writes)
	}
}

// `service rm a nosuch b` removes a and b and says which name it could not
// remove, as `docker service rm` does; it used to stop at nosuch, leaving b.
func TestServiceRmRemovesEveryServiceItCan(t *testing.T) {
	var deleted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/v1/services/")
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodDelete || strings.HasPrefix(name, "nosuch") {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(client.ErrorBody{Error: "service \"" + name + "\" does not exist", Code: client.CodeNotFound})
			return
		}
		deleted = append(deleted, name)
		var s client.Service
		s.Spec.Name = name
		_ = json.NewEncoder(w).Encode(s)
	}))
	defer srv.Close()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"service", "rm", "--addr", srv.URL, "--tls-dir", "", "a", "nosuch", "b", "nosuch2"})
	err := root.Execute()
	if want := `service "nosuch" does not exist; service "nosuch2" does not exist`; err == nil || err.Error() != want {
		t.Errorf("rm: %v, want %s", err, want)
	}
	if strings.Join(deleted, ",") != "a,b" || out.String() != "a\nb\n" {
		t.Errorf("removed %v, printed %q; want a and b", deleted, out.String())
	}
}

// `node update vm --label-rm zone` with a key the node does not have is a
// typo more often than not: refused, as docker node update does, without a
// write (it used to print the node's ID and change nothing).
func TestNodeLabelRmOfAMissingKeyIsRefused(t *testing.T) {
	writes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes++
		}
		w.Header().Set("Content-Type", "application/json")
		n := client.Node{ID: 1, Name: "vm", Labels: map[string]string{"zone": "a"}}
		if r.URL.Path == "/v1/nodes" {
			_ = json.NewEncoder(w).Encode(client.List[client.Node]{Items: []client.Node{n}})
			return
		}
		_ = json.NewEncoder(w).Encode(n)
	}))
	defer srv.Close()
	run := func(args ...string) error {
		root := newRoot()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"node", "update", "--addr", srv.URL, "--tls-dir", ""}, args...))
		return root.Execute()
	}
	err := run("vm", "--label-rm", "zoen")
	if want := `--label-rm "zoen": node "vm" has no label zoen (its labels: zone)`; err == nil || err.Error() != want {
		t.Errorf("label-rm of a missing key: %v, want %s", err, want)
	}
	if writes != 0 {
		t.Errorf("%d writes for a refused update", writes)
	}
	if err := run("vm", "--label-rm", "zone"); err != nil || writes != 1 {
		t.Errorf("label-rm of a key the node has: %v, %d writes", err, writes)
	}
}
