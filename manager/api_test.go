package manager

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"shoal/api/client"
	"shoal/route"
	"shoal/wire"
)

func u32(v uint32) *uint32 { return &v }

// The user API over real HTTP against three replicas: create, list,
// inspect, compare-and-set, blocking reads, events, errors, follower reads,
// metrics, and a leader killed while a client waits.
func TestAPIOverThreeReplicas(t *testing.T) {
	begun := time.Now()
	c := startThree(t)
	c1 := c.client(1)
	ctx := ctxT(t)

	// Each replica registered itself through its own engine; replica 1
	// may apply the last registration a moment later.
	eventually(t, 10*time.Second, func() (bool, string) {
		st, err := c1.Status(ctx)
		return err == nil && len(st.Managers) == 3 && len(st.Groups) == 3, fmt.Sprintf("status: %+v, %v", st, err)
	})
	leaderNamed(t, c, begun)

	created, idx, err := c1.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(3), Command: []string{"sleep", "1000"}})
	if err != nil || created.Spec.Name != "web" || *created.Spec.Replicas != 3 || idx == "" {
		t.Fatalf("create: %+v %q %v", created, idx, err)
	}
	if _, _, err := c1.CreateService(ctx, client.ServiceSpec{Name: "web", Command: []string{"true"}}); !isCode(err, client.CodeConflict, 409) {
		t.Fatalf("second create of web: %v", err)
	}

	t.Run("follower reads after a blocking read on the write's index", func(t *testing.T) {
		for id := uint64(1); id <= 3; id++ {
			l, _, err := c.client(id).Services(ctx, &client.Query{Index: tokenBefore(t, idx), Wait: 10 * time.Second})
			if err != nil || len(l.Items) != 1 || l.Items[0].Spec.Name != "web" {
				t.Fatalf("replica %d lists %+v, %v", id, l.Items, err)
			}
		}
	})

	t.Run("compare-and-set", func(t *testing.T) {
		svc, _, err := c1.Service(ctx, "web", nil)
		if err != nil {
			t.Fatal(err)
		}
		spec := svc.Spec
		spec.Env = []string{"A=1"}
		if _, _, err := c1.UpdateService(ctx, spec, svc.ModifyIndex-1); !isCode(err, client.CodeStale, 409) {
			t.Fatalf("stale update: %v", err)
		}
		up, _, err := c1.UpdateService(ctx, spec, svc.ModifyIndex)
		if err != nil || up.SpecVersion != 2 {
			t.Fatalf("current update: %+v, %v", up, err)
		}
	})

	t.Run("blocking read released by a write", func(t *testing.T) {
		_, idx, err := c.client(2).Service(ctx, "web", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan client.Service, 1)
		go func() {
			// Any change releases a blocking read: follow until the scale shows.
			for {
				s, next, err := c.client(2).Service(ctx, "web", &client.Query{Index: idx, Wait: 20 * time.Second})
				if err != nil {
					t.Error(err)
				}
				if err != nil || *s.Spec.Replicas == 5 || next == idx {
					got <- s
					return
				}
				idx = next
			}
		}()
		if _, _, err := c1.Scale(ctx, "web", 5); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			if *s.Spec.Replicas != 5 {
				t.Fatalf("blocking read returned replicas=%d", *s.Spec.Replicas)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("blocking read not released by the write")
		}
	})

	t.Run("events resume from an index", func(t *testing.T) {
		st, err := c1.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c1.CreateService(ctx, client.ServiceSpec{Name: "ev", Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		var seen []client.Event
		errFound := errors.New("found")
		err = c1.Events(ctx, st.Index, []string{"service"}, func(ev client.Event) error {
			seen = append(seen, ev)
			if ev.Key == "ev" && ev.Service != nil {
				return errFound
			}
			return nil
		})
		if !errors.Is(err, errFound) {
			t.Fatalf("stream from %s: %v after %+v", st.Index, err, seen)
		}
		// Resuming after that event repeats nothing of earlier entries (only
		// the rest of its own entry may come again: a cursor counts whole
		// entries).
		last := seen[len(seen)-1]
		if _, _, err := c1.CreateService(ctx, client.ServiceSpec{Name: "ev2", Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		err = c1.Events(ctx, last.Index, []string{"service"}, func(ev client.Event) error {
			if ev.Key == "ev" && (ev.Group != last.Group || ev.Raft < last.Raft) {
				t.Fatalf("event before the resume index came again: %+v", ev)
			}
			if ev.Key == "ev2" {
				return errFound
			}
			return nil
		})
		if !errors.Is(err, errFound) {
			t.Fatalf("resumed stream: %v", err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		base := "http://" + c.ms[0].APIAddr
		// A 2 MiB body is refused from its Content-Length, before it is sent.
		conn, err := net.Dial("tcp", c.ms[0].APIAddr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/services HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 2<<20)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), client.CodeTooLarge) {
			t.Errorf("2 MiB body: %d %s", resp.StatusCode, b)
		}
		for _, tc := range []struct {
			body   []byte
			status int
			code   string
		}{
			{[]byte(`{"name": "x",`), 400, client.CodeMalformed},
			{[]byte(`{"name": "x", "replicaz": 3}`), 400, client.CodeMalformed},
			{[]byte(`{"name": "x", "command": ["true"], "restart": {"condition": "sometimes"}}`), 422, client.CodeInvalidSpec},
			{[]byte(`{"name": "bad name", "command": ["true"]}`), 422, client.CodeInvalidSpec},
			{[]byte(`{"name": "nocommand"}`), 422, client.CodeInvalidSpec},
		} {
			resp, err := http.Post(base+"/v1/services", "application/json", bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
				t.Errorf("body %.40q: got %d %s; want %d %s", tc.body, resp.StatusCode, b, tc.status, tc.code)
			}
		}
		if _, err := c1.Network(ctx, "nope"); !isCode(err, client.CodeNotFound, 404) {
			t.Errorf("missing network: %v", err)
		}
	})

	t.Run("tasks, networks, nodes", func(t *testing.T) {
		// The replica leading the cluster group runs the scheduler and
		// knows why tasks stay pending.
		lead := c.client(c.leaderOf(route.ClusterGroup))
		var l client.List[client.Task]
		eventually(t, 10*time.Second, func() (bool, string) {
			l, _, err = lead.Tasks(ctx, &client.Query{Params: url.Values{"service": {"web"}}})
			if err != nil || len(l.Items) != 5 {
				return false, fmt.Sprintf("tasks of web: %d, %v", len(l.Items), err)
			}
			for _, tk := range l.Items {
				if tk.State != "pending" || tk.Message == "" {
					return false, fmt.Sprintf("without nodes a task should be pending and say why: %+v", tk)
				}
			}
			return true, ""
		})
		one, err := c1.Task(ctx, l.Items[0].ID)
		if err != nil || len(one.History) == 0 {
			t.Fatalf("task inspect: %+v, %v", one, err)
		}
		page, _, err := c1.Tasks(ctx, &client.Query{Params: url.Values{"per_page": {"2"}}})
		if err != nil || len(page.Items) != 2 || page.NextToken == "" {
			t.Fatalf("first page: %d items, token %q, %v", len(page.Items), page.NextToken, err)
		}
		// Paging through a service's tasks two at a time lists each once,
		// in ID order.
		paged := pageTasks(t, ctx, lead, url.Values{"service": {"web"}, "per_page": {"2"}}, 5)
		var all []string
		for _, tk := range l.Items {
			all = append(all, tk.ID)
		}
		slices.SortFunc(all, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) })
		if !slices.Equal(paged, all) {
			t.Fatalf("paging web's tasks two at a time gave %v, want %v", paged, all)
		}
		// Paging through every task, n at a time, lists each once, in ID
		// order, across the service groups.
		for i := range 6 {
			if _, _, err := c1.CreateService(ctx, client.ServiceSpec{Name: fmt.Sprintf("pager%d", i), Replicas: u32(2), Command: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
		}
		// Every task, from each service's listing, in ID order (the
		// services' changes are still applying on this replica: callers
		// retry until it agrees with the pages).
		listAll := func() []string {
			svcs, _, err := lead.Services(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, sv := range svcs.Items {
				l, _, err := lead.Tasks(ctx, &client.Query{Params: url.Values{"service": {sv.Spec.Name}, "per_page": {"10000"}}})
				if err != nil {
					t.Fatal(err)
				}
				for _, tk := range l.Items {
					ids = append(ids, tk.ID)
				}
			}
			slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) })
			return ids
		}
		groups := map[uint64]bool{}
		for _, id := range listAll() {
			n, _ := strconv.ParseUint(id, 10, 64)
			groups[n>>48] = true
		}
		if len(groups) < 2 {
			t.Fatalf("the tasks are in %d service groups, want 2", len(groups))
		}
		for per := 1; per <= 4; per++ {
			eventually(t, 10*time.Second, func() (bool, string) {
				all := listAll()
				paged := pageTasks(t, ctx, lead, url.Values{"per_page": {strconv.Itoa(per)}}, len(all)+1)
				return slices.Equal(paged, all), fmt.Sprintf("paging every task %d at a time gave %v, want %v", per, paged, all)
			})
		}
		nw, err := c1.CreateNetwork(ctx, client.NetworkSpec{Name: "backend", Subnet: "10.9.0.0/24"})
		if err != nil || nw.Size == 0 || nw.Free != nw.Size {
			t.Fatalf("network: %+v, %v", nw, err)
		}
		if err := c1.RemoveNetwork(ctx, "backend"); err != nil {
			t.Fatal(err)
		}
		nodes, _, err := c1.Nodes(ctx, nil)
		if err != nil || len(nodes.Items) != 0 {
			t.Fatalf("nodes: %+v, %v", nodes, err)
		}
	})

	t.Run("request IDs", func(t *testing.T) {
		// The same create sent twice under one request ID (its first
		// answer lost) applies once and answers as applied both times.
		post := func(id string) (int, client.Service, http.Header) {
			body := `{"name":"once","replicas":1,"command":["sleep","1000"]}`
			req, _ := http.NewRequest("POST", "http://"+c.ms[0].APIAddr+"/v1/services", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if id != "" {
				req.Header.Set(client.RequestIDHeader, id)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var svc client.Service
			_ = json.NewDecoder(resp.Body).Decode(&svc)
			return resp.StatusCode, svc, resp.Header
		}
		st1, first, h := post("op-42")
		st2, second, _ := post("op-42")
		if st1 != 201 || st2 != 201 || h.Get(client.RequestIDHeader) != "op-42" || first.ModifyIndex != second.ModifyIndex {
			t.Fatalf("the same request twice: %d %+v, then %d %+v (header %q)", st1, first, st2, second, h.Get(client.RequestIDHeader))
		}
		if st, _, _ := post(""); st != 409 {
			t.Fatalf("the same create under a new request ID: %d, want 409", st)
		}
		out, err := c1.Request(ctx, "op-42", time.Time{})
		if err != nil || out.Outcome != client.OutcomeApplied || out.ObjectID == 0 || out.Index == 0 {
			t.Fatalf("GET /v1/requests/op-42: %+v, %v", out, err)
		}
		// Never applied, its not_after passed: not applied, for good.
		past := time.Now().Add(-time.Minute)
		out, err = c1.Request(ctx, "op-never", past)
		if err != nil || out.Outcome != client.OutcomeNotApplied {
			t.Fatalf("a request whose not_after passed: %+v, %v", out, err)
		}
		out, err = c1.Request(ctx, "op-never", time.Now().Add(time.Minute))
		if err != nil || out.Outcome != client.OutcomePending {
			t.Fatalf("a request that may still apply: %+v, %v", out, err)
		}
		if _, err := c1.Request(ctx, "no spaces allowed", time.Time{}); !isCode(err, client.CodeMalformed, 400) {
			t.Fatalf("a malformed request ID: %v", err)
		}
		if _, _, err := c1.RemoveService(ctx, "once"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("staleness said, consistent reads", func(t *testing.T) {
		// Every replica says whether it knows the leader and how long
		// since it heard it; ?consistent=true reads through the quorum.
		for _, m := range c.ms {
			resp, err := http.Get("http://" + m.APIAddr + "/v1/services?consistent=true")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			lc, err := strconv.Atoi(resp.Header.Get("X-Shoal-Last-Contact"))
			if resp.StatusCode != 200 || resp.Header.Get("X-Shoal-Known-Leader") != "true" || err != nil || lc < 0 || lc > 5000 {
				t.Fatalf("replica at %s: %s, known leader %q, last contact %q", m.APIAddr, resp.Status,
					resp.Header.Get("X-Shoal-Known-Leader"), resp.Header.Get("X-Shoal-Last-Contact"))
			}
		}
		resp, err := http.Get("http://" + c.ms[0].APIAddr + "/v1/services?consistent=maybe")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("?consistent=maybe: %s, want 400", resp.Status)
		}
		cc := *c1
		cc.Consistent = true
		if l, _, err := cc.Services(ctx, nil); err != nil || len(l.Items) == 0 {
			t.Fatalf("a consistent list through the client: %+v, %v", l, err)
		}
	})

	t.Run("metrics parse", func(t *testing.T) {
		resp, err := http.Get("http://" + c.ms[0].APIAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("metrics do not parse: %v", err)
		}
		for _, name := range []string{"shoal_tasks", "shoal_http_requests_total", "go_memstats_heap_inuse_bytes"} {
			if fams[name] == nil {
				t.Errorf("metric %s missing", name)
			}
		}
		// Every write above was proposed by some replica: the proposal
		// counters, summed over replicas, saw entries carrying at least as
		// many commands.
		var entries, cmds float64
		for _, m := range c.ms {
			resp, err := http.Get("http://" + m.APIAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			tp := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := tp.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("metrics do not parse: %v", err)
			}
			for _, f := range []struct {
				name string
				sum  *float64
			}{{"shoal_group_proposals_total", &entries}, {"shoal_group_proposed_commands_total", &cmds}} {
				fam := fams[f.name]
				if fam == nil {
					t.Fatalf("metric %s missing", f.name)
				}
				for _, mm := range fam.GetMetric() {
					*f.sum += mm.GetUntyped().GetValue() + mm.GetCounter().GetValue()
				}
			}
		}
		if entries == 0 || cmds < entries {
			t.Errorf("proposals: %v entries carrying %v commands over the replicas; want some, with at least one command each", entries, cmds)
		}
	})

	t.Run("leader killed while a client waits", func(t *testing.T) {
		g := route.ServiceGroup("web", 2)
		leader := c.leaderOf(g)
		waiter := uint64(1)
		if waiter == leader {
			waiter = 2
		}
		other := 6 - leader - waiter
		_, idx, err := c.client(waiter).Service(ctx, "web", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan uint32, 1)
		go func() {
			for {
				s, next, err := c.client(waiter).Service(ctx, "web", &client.Query{Index: idx, Wait: 25 * time.Second})
				if err != nil {
					t.Error(err)
				}
				if err != nil || *s.Spec.Replicas == 2 || next == idx {
					got <- *s.Spec.Replicas
					return
				}
				idx = next
			}
		}()
		c.stop(leader)
		eventually(t, 20*time.Second, func() (bool, string) {
			_, _, err := c.client(other).Scale(ctx, "web", 2)
			return err == nil, "scale after the leader died: " + errString(err)
		})
		select {
		case r := <-got:
			if r != 2 {
				t.Fatalf("blocking read returned replicas=%d", r)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("blocking read not released after failover")
		}
	})
}

// tokenBefore returns a cursor token one entry before tok in every group,
// so a blocking read on it returns once the replica has what tok reflects.
func tokenBefore(t *testing.T, tok string) string {
	c, err := wire.ParseCursor(tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] > 0 {
			c[i]--
		}
	}
	return c.Token()
}

func isCode(err error, code string, status int) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Code == code && ae.Status == status
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// Scales made at once without ?check_index= all take effect: each reads
// the spec and writes it back, so all but one find it changed since their
// read; the server reads it again and scales the fresh spec instead of
// telling the caller to retry, and never writes over another's change (the
// environment a concurrent update set stays).
func TestConcurrentScalesAllTakeEffect(t *testing.T) {
	c := startCluster(t, 1)
	c1 := c.client(1)
	ctx := ctxT(t)
	if _, _, err := c1.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(1), Command: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make(chan error, writers+1)
	start := make(chan struct{})
	for i := range writers {
		go func() {
			<-start
			_, _, err := c1.Scale(ctx, "web", uint32(10+i))
			errs <- err
		}()
	}
	go func() {
		<-start
		svc, _, err := c1.Service(ctx, "web", nil)
		if err == nil {
			spec := svc.Spec
			spec.Env = []string{"KEEP=1"}
			for {
				_, _, err = c1.UpdateService(ctx, spec, svc.ModifyIndex)
				if !isCode(err, client.CodeStale, 409) {
					break
				}
				if svc, _, err = c1.Service(ctx, "web", nil); err != nil {
					break
				}
				spec.Replicas = svc.Spec.Replicas
			}
		}
		errs <- err
	}()
	close(start)
	for range writers + 1 {
		if err := <-errs; err != nil {
			t.Fatalf("a write made at once with the others failed: %v", err)
		}
	}
	svc, _, err := c1.Service(ctx, "web", nil)
	if err != nil || len(svc.Spec.Env) != 1 || svc.Spec.Env[0] != "KEEP=1" || *svc.Spec.Replicas < 10 {
		t.Fatalf("service after the writes: env %v replicas %v (%v); want the update's env kept and a scale's count", svc.Spec.Env, svc.Spec.Replicas, err)
	}
}

// A new session starts with the heartbeat period the node monitor hands a
// cluster of that many nodes (never below --min-heartbeat), not a fixed
// second: the session's first heartbeats wait that long for an answer.
func TestSessionStartsWithTheMonitorsPeriod(t *testing.T) {
	_, _, s := oneReplicaSession(t, 3*time.Second)
	if got := time.Duration(s.HeartbeatPeriod); got != 3*time.Second {
		t.Fatalf("the session's heartbeat period is %s, want the monitor's 3s", got)
	}
}

// pageTasks lists tasks matching q page by page (at most pages pages) and
// returns their IDs in the order the pages gave them.
func pageTasks(t *testing.T, ctx context.Context, c *client.Client, q url.Values, pages int) []string {
	t.Helper()
	var ids []string
	for range pages {
		p, _, err := c.Tasks(ctx, &client.Query{Params: q})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range p.Items {
			ids = append(ids, tk.ID)
		}
		if p.NextToken == "" {
			break
		}
		q.Set("next_token", p.NextToken)
	}
	return ids
}
