package api

// The user API's handlers over real HTTP and the real client, on groups
// held in memory (duty.Memory behind the leader duties' Submitter): no
// Raft, no engine. What these check was checked over three Raft replicas
// before (docs/testing.md, "Where the manager's protocol is tested"); the
// manager's own tests keep the wiring.

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

	"shoal/api/client"
	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/manager/control"
	routing "shoal/route"
	"shoal/statemachine"
)

// memReplica is one replica over duty.Memory: reads and commits go to the
// in-memory groups, through the Submitter as manager.Start wires it; the
// leader, contact and membership answers are replica's (this replica
// leads).
type memReplica struct {
	*replica
	m   *duty.Memory
	sub *duty.Submitter
	// before, if set, runs before each command is submitted (a test's
	// concurrent writer).
	before func(cmd statemachine.Command)
}

func (r *memReplica) hook(cmds ...statemachine.Command) {
	if r.before != nil {
		for _, c := range cmds {
			r.before(c)
		}
	}
}

func (r *memReplica) ReadLocal(g int, fn func(*statemachine.State)) error {
	return r.m.ReadLocal(g, fn)
}
func (r *memReplica) Read(ctx context.Context, g int, fn func(*statemachine.State)) error {
	return r.m.Read(ctx, g, fn)
}
func (r *memReplica) Groups() int                    { return r.m.Groups() }
func (r *memReplica) GroupOfService(name string) int { return routing.ServiceGroup(name, r.m.Groups()) }
func (r *memReplica) Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	r.hook(cmd)
	return r.sub.Submit(ctx, cmd)
}
func (r *memReplica) SubmitMany(ctx context.Context, cmds []statemachine.Command) []routing.Outcome {
	r.hook(cmds...)
	return r.sub.SubmitMany(ctx, cmds)
}
func (r *memReplica) SubmitBeforeFanout(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	return r.sub.SubmitBeforeFanout(ctx, cmd)
}
func (r *memReplica) SubmitToGroup(ctx context.Context, g int, cmd statemachine.Command) (statemachine.Result, error) {
	return r.sub.SubmitToGroup(ctx, g, cmd)
}

// serveMem serves the API of one replica over two service groups in
// memory on a loopback port and returns a client of it and its address.
func serveMem(t *testing.T) (*client.Client, string, *memReplica) {
	t.Helper()
	m := duty.NewMemory(2, clock.Real{})
	r := &memReplica{replica: &replica{leader: 1}, m: m, sub: duty.NewSubmitter(m, nil)}
	feed := control.NewFeed(m.Groups(), nil, 1024, 16)
	m.OnApply(feed.OnApply)
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: feed, Monitor: beats{ttl: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	cl, err := client.New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return cl, ln.Addr().String(), r
}

func u32(v uint32) *uint32 { return &v }

func isCode(err error, code string, status int) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Code == code && ae.Status == status
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A second create of a name is a conflict; an update checked against an
// older index is stale and changes nothing; one against the current index
// makes the next spec version.
func TestCreateConflictsAndUpdateComparesAndSets(t *testing.T) {
	c, _, _ := serveMem(t)
	ctx := testCtx(t)
	created, idx, err := c.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(3), Command: []string{"sleep", "1000"}})
	if err != nil || created.Spec.Name != "web" || *created.Spec.Replicas != 3 || idx == "" {
		t.Fatalf("create: %+v %q %v", created, idx, err)
	}
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "web", Command: []string{"true"}}); !isCode(err, client.CodeConflict, 409) {
		t.Fatalf("second create of web: %v", err)
	}
	svc, _, err := c.Service(ctx, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A scale moves the service past the index read above.
	scaled, _, err := c.Scale(ctx, "web", 4)
	if err != nil {
		t.Fatal(err)
	}
	spec := svc.Spec
	spec.Env = []string{"A=1"}
	if _, _, err := c.UpdateService(ctx, spec, svc.ModifyIndex); !isCode(err, client.CodeStale, 409) {
		t.Fatalf("update checked against the index before the scale: %v", err)
	}
	if now, _, err := c.Service(ctx, "web", nil); err != nil || now.Spec.Env != nil || *now.Spec.Replicas != 4 {
		t.Fatalf("the stale update changed the service: %+v, %v", now.Spec, err)
	}
	spec.Replicas = scaled.Spec.Replicas
	up, _, err := c.UpdateService(ctx, spec, scaled.ModifyIndex)
	if err != nil || up.SpecVersion != 2 || up.Spec.Env[0] != "A=1" {
		t.Fatalf("current update: %+v, %v", up, err)
	}
}

// A blocking read on an index waits while nothing is written, and returns
// once a write moves past it, with what the write did.
func TestBlockingReadReleasedByAWrite(t *testing.T) {
	c, _, _ := serveMem(t)
	ctx := testCtx(t)
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(1), Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	_, idx, err := c.Service(ctx, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing written: the read waits out its wait, and answers the same
	// index.
	begun := time.Now()
	if _, next, err := c.Service(ctx, "web", &client.Query{Index: idx, Wait: 300 * time.Millisecond}); err != nil || next != idx || time.Since(begun) < 300*time.Millisecond {
		t.Fatalf("a blocking read with nothing written returned after %s at %q (%v); want its wait, at %q", time.Since(begun), next, err, idx)
	}
	got := make(chan uint32, 1)
	go func() {
		for {
			s, next, err := c.Service(ctx, "web", &client.Query{Index: idx, Wait: 20 * time.Second})
			if err != nil {
				t.Error(err)
			}
			if err != nil || *s.Spec.Replicas == 5 || next == idx {
				got <- *s.Spec.Replicas
				return
			}
			idx = next
		}
	}()
	if _, _, err := c.Scale(ctx, "web", 5); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r != 5 {
			t.Fatalf("blocking read returned replicas=%d", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("blocking read not released by the write")
	}
}

// The event stream from an index brings later writes' events; resuming
// after an event repeats no earlier entry's (only the rest of its own
// entry may come again: a cursor counts whole entries).
func TestEventsResumeFromAnIndex(t *testing.T) {
	c, _, _ := serveMem(t)
	ctx := testCtx(t)
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"early", "ev"} {
		if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: name, Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	var seen []client.Event
	errFound := errors.New("found")
	err = c.Events(ctx, st.Index, []string{"service"}, func(ev client.Event) error {
		seen = append(seen, ev)
		if ev.Key == "ev" && ev.Service != nil {
			return errFound
		}
		return nil
	})
	if !errors.Is(err, errFound) {
		t.Fatalf("stream from %s: %v after %+v", st.Index, err, seen)
	}
	last := seen[len(seen)-1]
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "ev2", Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	err = c.Events(ctx, last.Index, []string{"service"}, func(ev client.Event) error {
		if ev.Key == "early" || ev.Key == "ev" && (ev.Group != last.Group || ev.Raft < last.Raft) {
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
}

// Bad input is refused with its status and code: a body over the limit
// from its Content-Length (before it is sent), malformed JSON, an unknown
// field, an invalid spec, a missing object, a bad ?consistent=.
func TestBadInputIsRefusedWithItsCode(t *testing.T) {
	c, addr, _ := serveMem(t)
	ctx := testCtx(t)
	conn, err := net.Dial("tcp", addr)
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
		resp, err := http.Post("http://"+addr+"/v1/services", "application/json", bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("body %.40q: got %d %s; want %d %s", tc.body, resp.StatusCode, b, tc.status, tc.code)
		}
	}
	if _, err := c.Network(ctx, "nope"); !isCode(err, client.CodeNotFound, 404) {
		t.Errorf("missing network: %v", err)
	}
	resp, err = http.Get("http://" + addr + "/v1/services?consistent=maybe")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("?consistent=maybe: %s, want 400", resp.Status)
	}
	cc := *c
	cc.Consistent = true
	if _, _, err := cc.Services(ctx, nil); err != nil {
		t.Errorf("a consistent list through the client: %v", err)
	}
}

// Tasks page in ID order across the service groups, each listed once,
// whatever the page size; a task's inspection has its history; a network
// is created whole and removed; nodes list empty without agents.
func TestTasksPageAcrossGroups(t *testing.T) {
	c, _, _ := serveMem(t)
	ctx := testCtx(t)
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(5), Command: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: fmt.Sprintf("pager%d", i), Replicas: u32(2), Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	byID := func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) }
	l, _, err := c.Tasks(ctx, &client.Query{Params: url.Values{"service": {"web"}}})
	if err != nil || len(l.Items) != 5 {
		t.Fatalf("tasks of web: %d, %v", len(l.Items), err)
	}
	var web []string
	for _, tk := range l.Items {
		web = append(web, tk.ID)
	}
	slices.SortFunc(web, byID)
	if paged := pageTasks(t, ctx, c, url.Values{"service": {"web"}, "per_page": {"2"}}, 5); !slices.Equal(paged, web) {
		t.Fatalf("paging web's tasks two at a time gave %v, want %v", paged, web)
	}
	one, err := c.Task(ctx, l.Items[0].ID)
	if err != nil || len(one.History) == 0 {
		t.Fatalf("task inspect: %+v, %v", one, err)
	}
	svcs, _, err := c.Services(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, sv := range svcs.Items {
		l, _, err := c.Tasks(ctx, &client.Query{Params: url.Values{"service": {sv.Spec.Name}, "per_page": {"10000"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range l.Items {
			all = append(all, tk.ID)
		}
	}
	slices.SortFunc(all, byID)
	groups := map[uint64]bool{}
	for _, id := range all {
		n, _ := strconv.ParseUint(id, 10, 64)
		groups[n>>48] = true
	}
	if len(all) != 17 || len(groups) != 2 {
		t.Fatalf("%d tasks in %d service groups, want 17 in 2", len(all), len(groups))
	}
	first, _, err := c.Tasks(ctx, &client.Query{Params: url.Values{"per_page": {"2"}}})
	if err != nil || len(first.Items) != 2 || first.NextToken == "" {
		t.Fatalf("first page: %d items, token %q, %v", len(first.Items), first.NextToken, err)
	}
	for per := 1; per <= 4; per++ {
		if paged := pageTasks(t, ctx, c, url.Values{"per_page": {strconv.Itoa(per)}}, len(all)+1); !slices.Equal(paged, all) {
			t.Fatalf("paging every task %d at a time gave %v, want %v", per, paged, all)
		}
	}
	nw, err := c.CreateNetwork(ctx, client.NetworkSpec{Name: "backend", Subnet: "10.9.0.0/24"})
	if err != nil || nw.Size == 0 || nw.Free != nw.Size {
		t.Fatalf("network: %+v, %v", nw, err)
	}
	if err := c.RemoveNetwork(ctx, "backend"); err != nil {
		t.Fatal(err)
	}
	nodes, _, err := c.Nodes(ctx, nil)
	if err != nil || len(nodes.Items) != 0 {
		t.Fatalf("nodes: %+v, %v", nodes, err)
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

// The same create sent twice under one request ID (its first answer lost)
// applies once and answers as applied both times; under a new ID it is a
// conflict. A request's outcome reads back: applied, not applied for good
// once its not_after passed, pending before; a malformed ID is refused.
func TestRequestIDsApplyOnce(t *testing.T) {
	c, addr, r := serveMem(t)
	ctx := testCtx(t)
	post := func(id string) (int, client.Service, http.Header) {
		body := `{"name":"once","replicas":1,"command":["sleep","1000"]}`
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/services", strings.NewReader(body))
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
	out, err := c.Request(ctx, "op-42", time.Time{})
	if err != nil || out.Outcome != client.OutcomeApplied || out.ObjectID == 0 || out.Index == 0 {
		t.Fatalf("GET /v1/requests/op-42: %+v, %v", out, err)
	}
	// The leader's time entries carry every group's time past a minute ago.
	for g := 0; g <= r.m.Groups(); g++ {
		r.m.Apply(g, statemachine.Command{Kind: statemachine.CmdTick})
	}
	out, err = c.Request(ctx, "op-never", time.Now().Add(-time.Minute))
	if err != nil || out.Outcome != client.OutcomeNotApplied {
		t.Fatalf("a request whose not_after passed: %+v, %v", out, err)
	}
	out, err = c.Request(ctx, "op-never", time.Now().Add(time.Minute))
	if err != nil || out.Outcome != client.OutcomePending {
		t.Fatalf("a request that may still apply: %+v, %v", out, err)
	}
	if _, err := c.Request(ctx, "no spaces allowed", time.Time{}); !isCode(err, client.CodeMalformed, 400) {
		t.Fatalf("a malformed request ID: %v", err)
	}
}

// Scales made at once without ?check_index= all take effect: each reads
// the spec and writes it back, so all but one find it changed since their
// read; the server reads it again and scales the fresh spec instead of
// telling the caller to retry, and never writes over another's change (the
// environment a concurrent update set stays).
func TestConcurrentScalesAllTakeEffect(t *testing.T) {
	c, _, _ := serveMem(t)
	ctx := testCtx(t)
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(1), Command: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make(chan error, writers+1)
	start := make(chan struct{})
	for i := range writers {
		go func() {
			<-start
			_, _, err := c.Scale(ctx, "web", uint32(10+i))
			errs <- err
		}()
	}
	go func() {
		<-start
		svc, _, err := c.Service(ctx, "web", nil)
		if err == nil {
			spec := svc.Spec
			spec.Env = []string{"KEEP=1"}
			for {
				_, _, err = c.UpdateService(ctx, spec, svc.ModifyIndex)
				if !isCode(err, client.CodeStale, 409) {
					break
				}
				if svc, _, err = c.Service(ctx, "web", nil); err != nil {
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
	svc, _, err := c.Service(ctx, "web", nil)
	if err != nil || len(svc.Spec.Env) != 1 || svc.Spec.Env[0] != "KEEP=1" || *svc.Spec.Replicas < 10 {
		t.Fatalf("service after the writes: env %v replicas %v (%v); want the update's env kept and a scale's count", svc.Spec.Env, svc.Spec.Replicas, err)
	}
}

// A scale whose write finds the spec changed since its read (here another
// client's update lands between them, three times running) reads the
// fresh spec and scales it: the caller gets its count and the other
// change stays.
func TestScaleRereadsAfterAConcurrentChange(t *testing.T) {
	c, _, r := serveMem(t)
	ctx := testCtx(t)
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(1), Command: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	g := routing.ServiceGroup("web", r.m.Groups())
	landed := 0
	r.before = func(cmd statemachine.Command) {
		if cmd.Kind != statemachine.CmdUpdateService || landed == 3 {
			return
		}
		landed++
		svc := r.m.State(g).ServiceByName("web")
		spec := svc.Spec
		spec.Env = []string{"OTHER=" + strconv.Itoa(landed)}
		if o := r.m.SubmitMany(ctx, []statemachine.Command{{Kind: statemachine.CmdUpdateService, Spec: &spec, Seq: svc.ModifyIndex}})[0]; o.Err() != nil {
			t.Errorf("the other client's update: %v", o.Err())
		}
	}
	got, _, err := c.Scale(ctx, "web", 7)
	if err != nil || *got.Spec.Replicas != 7 || len(got.Spec.Env) != 1 || got.Spec.Env[0] != "OTHER=3" {
		t.Fatalf("scale over three concurrent updates: replicas %v env %v (%v); want 7 and OTHER=3", got.Spec.Replicas, got.Spec.Env, err)
	}
	if landed != 3 {
		t.Fatalf("%d concurrent updates landed, want 3", landed)
	}
}

// The task history limit is refused out of range naming the field; a good
// one reaches every group (the Submitter delivers it) and status shows it.
func TestClusterSettingsThroughTheAPI(t *testing.T) {
	c, _, r := serveMem(t)
	ctx := testCtx(t)
	for _, bad := range []int{0, 101} {
		if _, err := c.UpdateClusterSettings(ctx, client.ClusterSettingsUpdate{TaskHistoryLimit: &bad}); !isCode(err, client.CodeInvalidSpec, 422) ||
			!strings.Contains(err.Error(), "task_history_limit") {
			t.Errorf("limit %d: %v, want 422 %s naming task_history_limit", bad, err, client.CodeInvalidSpec)
		}
	}
	limit := 2
	got, err := c.UpdateClusterSettings(ctx, client.ClusterSettingsUpdate{TaskHistoryLimit: &limit})
	if err != nil || got.TaskHistoryLimit != 2 {
		t.Fatalf("update: %+v, %v", got, err)
	}
	for g := 0; g <= r.m.Groups(); g++ {
		if l := r.m.State(g).Settings().TaskHistoryLimit; l != 2 {
			t.Errorf("group %d has limit %d, want 2", g, l)
		}
	}
	st, err := c.Status(ctx)
	if err != nil || st.Settings.TaskHistoryLimit != 2 {
		t.Fatalf("status shows settings %+v (%v); want limit 2", st.Settings, err)
	}
}
