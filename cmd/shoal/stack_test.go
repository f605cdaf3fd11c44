package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The example stack deploys with the built binary on two real agents; a
// second deploy of the same file changes nothing (no spec version or
// modify index moves, no task is created); an edited file updates only
// what changed (a rolling update for the service whose environment
// changed, a scale keeping the running tasks for the one whose count
// changed, removal of the one that left the file); `stack rm` leaves no
// service and no network.
func TestStackDeployExample(t *testing.T) {
	killLeftovers(t, "sleep 100000")
	api, _, _ := oneManager(t, 2, "--sync-interval", "1s")
	example, err := filepath.Abs("../../examples/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deploy := func(file string) []string {
		t.Helper()
		out := cli(t, api, "stack", "deploy", "-c", file, "shop")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(lines)
		return lines
	}
	expect := func(what string, got []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s printed\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	type state struct {
		version, modify uint64
		tasks           []string // IDs of the tasks wanted running
	}
	inspect := func(name string) state {
		t.Helper()
		var svc struct {
			SpecVersion uint64 `json:"spec_version"`
			ModifyIndex uint64 `json:"modify_index"`
		}
		if err := json.Unmarshal([]byte(cli(t, api, "service", "inspect", name)), &svc); err != nil {
			t.Fatal(err)
		}
		s := state{version: svc.SpecVersion, modify: svc.ModifyIndex}
		for _, r := range psJSON(t, api, name) {
			if r.Desired == "running" {
				s.tasks = append(s.tasks, r.ID)
			}
		}
		slices.Sort(s.tasks)
		return s
	}
	running := func(want map[string]int) {
		t.Helper()
		waitFor(t, 60*time.Second, "the stack's tasks running", func() (bool, string) {
			var b strings.Builder
			ok := true
			for name, n := range want {
				rows := psJSON(t, api, name)
				got := countState(rows, "running")
				ok = ok && got == n && len(rows) >= n
				b.WriteString(name + ": " + strings.Repeat("R", got) + " ")
			}
			return ok, b.String()
		})
	}

	expect("the first deploy", deploy(example),
		"Creating network shop_back", "Creating network shop_front",
		"Creating service shop_api", "Creating service shop_logship", "Creating service shop_web")
	running(map[string]int{"shop_web": 3, "shop_api": 2, "shop_logship": 2})
	if out := cli(t, api, "stack", "ls"); !strings.Contains(out, "shop   3") {
		t.Fatalf("stack ls:\n%s", out)
	}
	if out := cli(t, api, "stack", "services", "shop"); strings.Count(out, "shop_") != 3 || !strings.Contains(out, "global") {
		t.Fatalf("stack services:\n%s", out)
	}
	before := map[string]state{}
	for _, n := range []string{"shop_web", "shop_api", "shop_logship"} {
		before[n] = inspect(n)
	}

	// The same file again: nothing moves.
	expect("a second deploy of the same file", deploy(example),
		"Service shop_api unchanged", "Service shop_logship unchanged", "Service shop_web unchanged")
	for n, b := range before {
		if got := inspect(n); got.version != b.version || got.modify != b.modify || !slices.Equal(got.tasks, b.tasks) {
			t.Fatalf("%s changed on a redeploy of the same file: %+v, was %+v", n, got, b)
		}
	}

	// An edited file: web's environment, api's count, logship gone.
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `PORT: "8080"`, `PORT: "9090"`, 1)
	edited = strings.Replace(edited, "replicas: 2", "replicas: 3", 1)
	at, end := strings.Index(edited, "  logship:"), strings.Index(edited, "networks:\n  front:")
	edited = edited[:at] + edited[end:]
	file := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	expect("a deploy of the edited file", deploy(file),
		"Removing service shop_logship (not in the file)", "Scaling service shop_api from 2 to 3",
		"Updating service shop_web (rolling update: env changed)")
	running(map[string]int{"shop_web": 3, "shop_api": 3})
	waitFor(t, 30*time.Second, "shop_logship removed", func() (bool, string) {
		out, _ := cliErr(t, api, "service", "ls", "-q")
		return !strings.Contains(out, "shop_logship"), out
	})
	web, apiSvc := inspect("shop_web"), inspect("shop_api")
	if web.version != before["shop_web"].version+1 {
		t.Fatalf("shop_web at spec version %d after its update, want %d", web.version, before["shop_web"].version+1)
	}
	if apiSvc.version != before["shop_api"].version || len(apiSvc.tasks) != 3 ||
		!slices.ContainsFunc(apiSvc.tasks, func(id string) bool { return id == before["shop_api"].tasks[0] }) ||
		!slices.ContainsFunc(apiSvc.tasks, func(id string) bool { return id == before["shop_api"].tasks[1] }) {
		t.Fatalf("shop_api after the scale: %+v, was %+v (want the same version and its two tasks kept)", apiSvc, before["shop_api"])
	}
	var env struct {
		Spec struct {
			Env []string `json:"env"`
		} `json:"spec"`
	}
	_ = json.Unmarshal([]byte(cli(t, api, "service", "inspect", "shop_web")), &env)
	if !slices.Contains(env.Spec.Env, "PORT=9090") {
		t.Fatalf("shop_web env after the update: %v", env.Spec.Env)
	}
	expect("the edited file again", deploy(file), "Service shop_api unchanged", "Service shop_web unchanged")

	// rm leaves nothing.
	out := cli(t, api, "stack", "rm", "shop")
	if !strings.Contains(out, "Removing network shop_back") || !strings.Contains(out, "Removing network shop_front") {
		t.Fatalf("stack rm:\n%s", out)
	}
	waitFor(t, 30*time.Second, "every service gone", func() (bool, string) {
		out, _ := cliErr(t, api, "service", "ls", "-q")
		return strings.TrimSpace(out) == "", out
	})
	if out := cli(t, api, "network", "ls"); strings.Contains(out, "shop_") {
		t.Fatalf("networks left after stack rm:\n%s", out)
	}
	if out := cli(t, api, "stack", "ls"); strings.Contains(out, "shop") {
		t.Fatalf("stack ls after rm:\n%s", out)
	}
}
