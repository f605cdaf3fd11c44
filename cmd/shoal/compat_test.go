package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
)

// compatFixture is the data directory the binary at this morning's
// release point (8309538: batch version 1, snapshot format 6) wrote;
// scripts/make-compat-fixture.sh makes it.
const compatFixture = "testdata/compat-8309538.tar.gz"

// The current binary starts on a data directory an older one wrote: every
// service (its spec, with the fields the old format lacked at their
// documented defaults), task, address, node, network and setting is there
// as the old API showed it; the old agent opens a session again as the
// same node; new writes apply, a new snapshot is taken, and the replica
// starts again from it.
func TestOldDataDirStarts(t *testing.T) {
	shoalBin(t)
	start := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s", time.Since(start).Seconds(), what) }
	dir := t.TempDir()
	unpackFixture(t, compatFixture, dir)
	var exp compatExpect
	b, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture from %s; old snapshots %v; %s", exp.Commit, exp.Snapshots, exp.StopLine)
	m1, a1 := filepath.Join(dir, "m1"), filepath.Join(dir, "a1")
	killLeftovers(t, "sleep "+compatMarker)
	api := freeAddr(t)
	serve := func(extra ...string) *proc {
		p := startProc(t, "serve", append([]string{"serve", "--insecure", "--id", "1", "--api-addr", api,
			"--data-dir", m1, "--raft-log-level", "critical", "--sync-interval", "2s"}, extra...)...)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("--- %s %v\n%s", p.name, p.args, p.out)
			}
		})
		waitFor(t, 20*time.Second, "the current binary ready on the old data directory", func() (bool, string) {
			select {
			case <-p.exited:
				t.Fatalf("serve exited on the old data directory:\n%s", p.out)
			default:
			}
			return strings.Contains(p.out.String(), "shoal: ready"), p.out.String()
		})
		return p
	}
	hc := &http.Client{Timeout: 20 * time.Second}

	// A snapshot every 16 entries from now on, so the writes below take
	// a new one in every group. The replica's clock is set back to just
	// after the fixture's last task change: its ticks apply at once, and
	// at today's time they would forget the request IDs at the first
	// (they are kept ten minutes of the state's time).
	var last time.Time
	for _, raw := range exp.Tasks {
		var l client.List[client.Task]
		mustDecode(t, raw, &l)
		for _, tk := range l.Items {
			if tk.Since.After(last) {
				last = tk.Since
			}
		}
	}
	back := time.Until(last.Add(time.Minute)).Round(time.Second)
	srv := serve("--snapshot-entries", "16", "--clock-offset", back.String())
	phase("ready on the old data directory")

	// The write sent with a request ID is remembered (its record is in the
	// old log, applied at the old state time).
	var ro client.RequestOutcome
	getJSON(t, hc, api, "/v1/requests/"+exp.RequestID, &ro)
	var oldSvcs client.List[client.Service]
	mustDecode(t, exp.Services, &oldSvcs)
	for _, s := range oldSvcs.Items {
		if s.Spec.Name != exp.RequestService {
			continue
		}
		if ro.Outcome != client.OutcomeApplied || ro.ObjectID != uint64(s.ID) || ro.Group != s.Group {
			t.Errorf("request %s: %+v, want applied in group %d (it created service %s, ID %d)",
				exp.RequestID, ro, s.Group, s.Spec.Name, s.ID)
		}
		// Sent again, it is answered as the first time, not refused as a
		// second create of the same name.
		if a := rawWrite(api, "POST", "/v1/services", s.Spec, exp.RequestID, 10*time.Second); a.status/100 != 2 {
			t.Errorf("the create of %s sent again with its request ID: %d %s %v", s.Spec.Name, a.status, a.body, a.err)
		}
	}
	checkAsWritten(t, hc, api, &exp)
	phase("checked as written")

	// The old agent's node opens a session again: the same node, no new one.
	var oldNodes client.List[client.Node]
	mustDecode(t, exp.Nodes, &oldNodes)
	agent := startProc(t, "agent", "agent", "--insecure", "--join", api, "--data-dir", a1)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- agent\n%s", agent.out)
		}
	})
	waitFor(t, 15*time.Second, "the old agent's node back", func() (bool, string) {
		var l client.List[client.Node]
		getJSON(t, hc, api, "/v1/nodes", &l)
		ok := len(l.Items) == 1 && l.Items[0].ID == oldNodes.Items[0].ID && l.Items[0].Status == "ready"
		return ok, fmt.Sprintf("%+v\n%s", l.Items, agent.out)
	})

	phase("the old agent's node is back")

	// New writes: a create, updates (one a rollback from the paused
	// update, moved by the rollback configuration the old spec lacked),
	// a removal, node labels.
	cli(t, api, "service", "create", "fresh", "--replicas", "1", "--network", "appnet", "--detach", "--", "sleep", compatMarker+"6")
	cli(t, api, "service", "update", "web", "-e", "MODE=three", "--detach")
	cli(t, api, "service", "rollback", "slow", "--detach")
	cli(t, api, "service", "rm", "mon")
	var nodeID = oldNodes.Items[0].ID
	waitFor(t, 10*time.Second, "a new snapshot in every group", func() (bool, string) {
		a := rawWrite(api, "POST", fmt.Sprintf("/v1/nodes/%d", nodeID), json.RawMessage(`{"labels":{"zone":"a","disk":"ssd","rack":"r7","tier":"back"}}`), "", 10*time.Second)
		if a.status != 200 {
			return false, fmt.Sprintf("label write: %d %s %v", a.status, a.body, a.err)
		}
		now := snapshotDirs(t, m1)
		return newerSnapshots(exp.Snapshots, now), fmt.Sprintf("old %v, now %v", exp.Snapshots, now)
	})
	// Its task runs on the old agent's node: the agent holds a session
	// and takes assignments.
	waitFor(t, 10*time.Second, "fresh runs on the old node", func() (bool, string) {
		rows := psJSON(t, api, "fresh")
		return len(rows) == 1 && rows[0].State == "running" && rows[0].Node == nodeID, fmt.Sprint(rows)
	})
	after := func() map[string]client.Service {
		var l client.List[client.Service]
		getJSON(t, hc, api, "/v1/services", &l)
		m := map[string]client.Service{}
		for _, s := range l.Items {
			m[s.Spec.Name] = s
		}
		return m
	}
	// A removed service is listed (removing) until the agent has stopped
	// its tasks.
	waitFor(t, 10*time.Second, "mon removed", func() (bool, string) {
		s, ok := after()["mon"]
		return !ok, fmt.Sprintf("%+v", s)
	})
	phase("new snapshots; fresh runs; mon removed")
	checkNew := func(when string) {
		t.Helper()
		m := after()
		if _, ok := m["mon"]; ok {
			t.Errorf("%s: mon still listed after rm", when)
		}
		if s, ok := m["fresh"]; !ok || s.Spec.Networks[0] != "appnet" {
			t.Errorf("%s: fresh: %+v", when, s)
		}
		if s := m["web"]; !strings.Contains(strings.Join(s.Spec.Env, ","), "MODE=three") {
			t.Errorf("%s: web's update is not there: %+v", when, s.Spec)
		}
		if s := m["slow"]; !strings.HasPrefix(s.Update.State, "rollback") || s.Spec.Command[0] != "sleep" {
			t.Errorf("%s: slow was not rolled back: %+v %+v", when, s.Update, s.Spec.Command)
		}
		if _, ok := m["db"]; !ok {
			t.Errorf("%s: db is gone", when)
		}
	}
	checkNew("after the writes")

	// Stop both and start again, from the new snapshots.
	stopProc(t, agent)
	stopProc(t, srv)
	phase("stopped")
	serve()
	phase("ready again")
	checkNew("after a restart")
	var l client.List[client.Node]
	getJSON(t, hc, api, "/v1/nodes", &l)
	if len(l.Items) != 1 || l.Items[0].Labels["tier"] != "back" || l.Items[0].Labels["zone"] != "a" {
		t.Errorf("node after a restart: %+v", l.Items)
	}
}

// newerSnapshots reports whether every group directory that held an old
// snapshot now holds a later one.
func newerSnapshots(old, now []string) bool {
	latest := func(list []string) map[string]string {
		m := map[string]string{}
		for _, p := range list {
			d, f := filepath.Split(p)
			m[d] = max(m[d], f) // fixed-width hex: text order is index order
		}
		return m
	}
	o, n := latest(old), latest(now)
	for d, f := range o {
		if n[d] <= f {
			return false
		}
	}
	return len(o) > 0
}

func mustDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
}

// checkAsWritten compares what the current binary's API answers with
// what the old binary's answered before it stopped.
func checkAsWritten(t *testing.T, hc *http.Client, api string, exp *compatExpect) {
	t.Helper()
	var want, got client.List[client.Service]
	mustDecode(t, exp.Services, &want)
	getJSON(t, hc, api, "/v1/services", &got)
	gotBy := map[string]client.Service{}
	for _, s := range got.Items {
		gotBy[s.Spec.Name] = s
	}
	if len(got.Items) != len(want.Items) {
		t.Errorf("%d services, the old binary showed %d", len(got.Items), len(want.Items))
	}
	for _, w := range want.Items {
		g, ok := gotBy[w.Spec.Name]
		if !ok {
			t.Errorf("service %s is gone", w.Spec.Name)
			continue
		}
		if g.ID != w.ID || g.Group != w.Group || g.SpecVersion != w.SpecVersion || g.Removing != w.Removing ||
			g.Update.State != w.Update.State || g.Update.Message != w.Update.Message {
			t.Errorf("service %s: id %d group %d version %d removing %v update %+v; the old binary showed %d %d %d %v %+v",
				w.Spec.Name, g.ID, g.Group, g.SpecVersion, g.Removing, g.Update, w.ID, w.Group, w.SpecVersion, w.Removing, w.Update)
		}
		// The old format had no labels and no rollback configuration: a
		// rollback moves by the update configuration and pauses on failure.
		ws := w.Spec
		if ws.Labels != nil || ws.Rollback != nil {
			t.Fatalf("the fixture's spec of %s has fields the old API did not have: %+v", w.Spec.Name, ws)
		}
		rb := *ws.Update
		if rb.FailureAction == "rollback" {
			rb.FailureAction = "pause"
		}
		ws.Rollback = &rb
		if !reflect.DeepEqual(g.Spec, ws) {
			gj, _ := json.Marshal(g.Spec)
			wj, _ := json.Marshal(ws)
			t.Errorf("service %s's spec:\n got  %s\n want %s", w.Spec.Name, gj, wj)
		}
		var wt, gt client.List[client.Task]
		mustDecode(t, exp.Tasks[w.Spec.Name], &wt)
		getJSON(t, hc, api, "/v1/tasks?service="+w.Spec.Name, &gt)
		if !reflect.DeepEqual(gt.Items, wt.Items) {
			gj, _ := json.Marshal(gt.Items)
			wj, _ := json.Marshal(wt.Items)
			t.Errorf("service %s's tasks:\n got  %s\n want %s", w.Spec.Name, gj, wj)
		}
	}
	for _, name := range []string{"web", "mon", "db"} {
		var tl client.List[client.Task]
		mustDecode(t, exp.Tasks[name], &tl)
		n := 0
		for _, tk := range tl.Items {
			n += len(tk.Addresses)
		}
		if n == 0 {
			t.Fatalf("the fixture's %s tasks hold no address: %s", name, exp.Tasks[name])
		}
	}

	var wn, gn client.List[client.Node]
	mustDecode(t, exp.Nodes, &wn)
	getJSON(t, hc, api, "/v1/nodes", &gn)
	if len(gn.Items) != len(wn.Items) {
		t.Fatalf("nodes: %+v, the old binary showed %+v", gn.Items, wn.Items)
	}
	for i, w := range wn.Items {
		g := gn.Items[i]
		// Its status is the monitor's, from heartbeats; the rest is stored.
		g.Status, g.StatusSince, w.Status, w.StatusSince = "", time.Time{}, "", time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("node:\n got  %+v\n want %+v", g, w)
		}
	}
	var wnet, gnet client.List[client.Network]
	mustDecode(t, exp.Networks, &wnet)
	getJSON(t, hc, api, "/v1/networks", &gnet)
	if !reflect.DeepEqual(gnet, wnet) {
		t.Errorf("networks:\n got  %+v\n want %+v", gnet, wnet)
	}
	var ws, gs client.ClusterSettings
	mustDecode(t, exp.Settings, &ws)
	getJSON(t, hc, api, "/v1/cluster/settings", &gs)
	if gs != ws {
		t.Errorf("settings: %+v, the old binary showed %+v", gs, ws)
	}
}
