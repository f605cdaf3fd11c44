package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The agent protocol in JSON, as someone writing another agent would speak
// it: literal JSON bodies over net/http to a real `serve --insecure`
// (neither the API client nor the wire encoder), through session,
// heartbeat, assignments, status and sync, with the protocol's edge cases:
//   - a body that is neither JSON nor a frame is answered 415;
//   - a sync naming a handle the manager does not know is told to destroy
//     it, and one naming an older sequence than an assignment made since
//     leaves the newer task alone;
//   - after the node went silent, a status report on a new session before
//     its first heartbeat is answered retry;
//   - a node that heartbeats but never sends its re-report marker stays
//     initializing, and goes down when it then misses heartbeats.
func TestAgentProtocolInJSON(t *testing.T) {
	api, _, _ := oneManager(t, 0, "--min-heartbeat", "1s", "--failover-grace", "0")
	post := func(path, contentType, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post("http://"+api+path, contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&m); err != nil {
			t.Fatalf("POST %s: %s, answer is not JSON: %q", path, resp.Status, raw)
		}
		return resp.StatusCode, m
	}
	agent := func(path, body string) map[string]any {
		t.Helper()
		st, m := post("/v1/agent/"+path, "application/json", body)
		if st != 200 {
			t.Fatalf("POST /v1/agent/%s %s: %d %v", path, body, st, m)
		}
		return m
	}
	num := func(v any) uint64 { f, _ := v.(float64); return uint64(f) }

	if st, m := post("/v1/agent/heartbeat", "text/plain", `{"node_id":1}`); st != 415 || m["code"] != "unsupported_media_type" {
		t.Fatalf("a text/plain body: %d %v, want 415 unsupported_media_type", st, m)
	}
	if st, m := post("/v1/agent/heartbeat", "application/json", `{"node_id":1,"bogus":2}`); st != 400 || m["code"] != "bad_request" {
		t.Fatalf("a JSON body with an unknown field: %d %v, want 400 bad_request", st, m)
	}

	sess := agent("session", `{"node_id":0,"node":{"hostname":"json-1","cpu":2000,"memory":1073741824},"key":"json-agent-1"}`)
	node, sid := num(sess["node_id"]), num(sess["session_id"])
	ids := fmt.Sprintf(`"node_id":%d,"session_id":%d`, node, sid)
	if hb := agent("heartbeat", "{"+ids+"}"); hb["status"] != "ready" {
		t.Fatalf("first heartbeat: %v", hb)
	}
	// A service with a disconnect window, so a silent node is
	// disconnected (and reconnects through initializing).
	if st, m := post("/v1/services", "application/json",
		`{"name":"js","replicas":1,"command":["sleep","7794"],"disconnect":{"lost_after":"60s"}}`); st != 201 {
		t.Fatalf("create js: %d %v", st, m)
	}
	var task uint64
	var cursor string
	var seqs []any
	waitFor(t, 20*time.Second, "the task in the node's assignments", func() (bool, string) {
		body := "{" + ids + "}"
		if cursor != "" {
			body = fmt.Sprintf(`{%s,"cursor":%q,"wait":2000000000}`, ids, cursor)
		}
		a := agent("assignments", body)
		cursor, _ = a["results_in"].(string)
		seqs, _ = a["seqs"].([]any)
		for _, tk := range asList(a["tasks"]) {
			if tk["service"] == "js" && tk["desired"] == "running" {
				task = num(tk["task"])
			}
		}
		return task != 0, fmt.Sprint(a)
	})
	seqJSON, _ := json.Marshal(seqs)
	ack := agent("status", fmt.Sprintf(`{%s,"reports":[{"task":%d,"state":"running","at":%d}],"re_report":true,"held":[%d]}`,
		ids, task, time.Now().UnixNano(), task))
	if r := asStrings(ack["results"]); len(r) != 1 || r[0] != "accepted" {
		t.Fatalf("running report: %v", ack)
	}

	// An unknown handle is destroyed; the running task is kept.
	sync := agent("sync", fmt.Sprintf(`{%s,"seqs":%s,"held":[%d,987654]}`, ids, seqJSON, task))
	if d := asNums(sync["destroy"]); len(d) != 1 || d[0] != 987654 {
		t.Fatalf("sync with an unknown handle: %v, want destroy [987654]", sync)
	}
	// Scaled to 2: a newer task is assigned to the node. A sync at the
	// older sequence, not listing it, leaves it assigned and wanted.
	if st, m := post("/v1/services/js/scale", "application/json", `{"replicas":2}`); st != 200 {
		t.Fatalf("scale: %d %v", st, m)
	}
	var newer uint64
	waitFor(t, 20*time.Second, "the newer task in the assignments", func() (bool, string) {
		a := agent("assignments", fmt.Sprintf(`{%s,"cursor":%q,"wait":2000000000}`, ids, cursor))
		cursor, _ = a["results_in"].(string)
		for _, tk := range asList(a["tasks"]) {
			if n := num(tk["task"]); n != task && tk["desired"] == "running" {
				newer = n
			}
		}
		return newer != 0, fmt.Sprint(a)
	})
	sync = agent("sync", fmt.Sprintf(`{%s,"seqs":%s,"held":[%d]}`, ids, seqJSON, task))
	if d := asNums(sync["destroy"]); len(d) != 0 {
		t.Fatalf("a sync at the older sequence: %v, want nothing destroyed", sync)
	}
	taskDoc := func(id uint64) map[string]any {
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/tasks/%d", api, id))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	if d := taskDoc(newer); d["desired"] != "running" || d["state"] != "assigned" {
		t.Fatalf("the newer task after a sync at an older sequence: %v", d)
	}

	// Silent past the TTL: the node is disconnected.
	nodeStatus := func() string {
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/nodes/%d", api, node))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		s, _ := m["status"].(string)
		return s
	}
	waitFor(t, 20*time.Second, "the silent node disconnected", func() (bool, string) {
		s := nodeStatus()
		return s == "disconnected", s
	})
	// A new session; a report before its first heartbeat is not taken.
	sess = agent("session", fmt.Sprintf(`{"node_id":%d,"node":{"hostname":"json-1","cpu":2000,"memory":1073741824}}`, node))
	ids = fmt.Sprintf(`"node_id":%d,"session_id":%d`, node, num(sess["session_id"]))
	ack = agent("status", fmt.Sprintf(`{%s,"reports":[{"task":%d,"state":"running","at":%d}]}`, ids, newer, time.Now().UnixNano()))
	if r := asStrings(ack["results"]); len(r) != 1 || r[0] != "retry" {
		t.Fatalf("a report before the first heartbeat after the reconnect: %v, want retry", ack)
	}
	// Heartbeats without the re-report marker, for over a heartbeat
	// period: initializing all along, never ready.
	first := time.Now()
	waitFor(t, 10*time.Second, "heartbeats for 1.5 s", func() (bool, string) {
		if hb := agent("heartbeat", "{"+ids+"}"); hb["status"] != "initializing" {
			t.Fatalf("a heartbeat of a node that never re-reported: %v, want initializing", hb)
		}
		return time.Since(first) > 1500*time.Millisecond, ""
	})
	if s := nodeStatus(); s != "initializing" {
		t.Fatalf("node after heartbeats without a re-report: %s", s)
	}
	// Then it misses heartbeats: down.
	waitFor(t, 20*time.Second, "the initializing node down after missed heartbeats", func() (bool, string) {
		s := nodeStatus()
		return s == "down", s
	})
}

func asList(v any) []map[string]any {
	var out []map[string]any
	l, _ := v.([]any)
	for _, x := range l {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func asStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func asNums(v any) []uint64 {
	var out []uint64
	l, _ := v.([]any)
	for _, x := range l {
		f, _ := x.(float64)
		out = append(out, uint64(f))
	}
	return out
}
