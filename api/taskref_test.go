package api

import (
	"encoding/json"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/internal/taskref"
	"shoal/manager/control"
	"shoal/statemachine"
)

// 100,000 tasks of one service, as a service group mints them, print
// 100,000 different short IDs, and each short ID typed back matches its
// own task alone: all of them against the sorted printed forms, and a
// spread of them through GET /v1/tasks?id_prefix=, as the CLI asks.
func TestHundredThousandTaskIDsPrintApartAndResolveBack(t *testing.T) {
	st := statemachine.New(statemachine.Config{Group: 1})
	var out statemachine.Output
	spec := statemachine.ServiceSpec{Name: "web", Replicas: 100_000, Command: []string{"sleep", "1000"}}
	st.Apply([]statemachine.Command{{Kind: statemachine.CmdCreateService, Spec: &spec}}, 1, 1_700_000_000e9, &out)
	if err := out.Results[0].Err(); err != nil {
		t.Fatal(err)
	}
	tasks := st.AppendServiceTasks(nil, st.ServiceByName("web").ID)
	if len(tasks) != 100_000 {
		t.Fatalf("%d tasks", len(tasks))
	}
	type printed struct {
		short string
		id    uint64
	}
	all := make([]printed, len(tasks))
	for i, tk := range tasks {
		all[i] = printed{taskref.Short(uint64(tk.ID)), uint64(tk.ID)}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].short < all[j].short })
	for i := range all {
		if i > 0 && all[i].short == all[i-1].short {
			t.Fatalf("tasks %d and %d both print %s", all[i-1].id, all[i].id, all[i].short)
		}
		next := sort.Search(len(all), func(j int) bool { return all[j].short > all[i].short+"~" })
		if next != i+1 {
			t.Fatalf("%s begins %d printed IDs", all[i].short, next-i)
		}
	}

	r := &replica{st: st, leader: 1}
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: control.NewFeed(1, nil, 16, 16), Monitor: beats{ttl: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	list := func(prefix string) []client.Task {
		t.Helper()
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI("/v1/tasks?per_page=4&id_prefix=" + prefix)
		s.handle(&ctx)
		var l client.List[client.Task]
		if ctx.Response.StatusCode() != 200 || json.Unmarshal(ctx.Response.Body(), &l) != nil {
			t.Fatalf("id_prefix=%s: %d %s", prefix, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		return l.Items
	}
	for i := 0; i < len(all); i += 997 {
		p := all[i]
		for _, typed := range []string{p.short, strconv.FormatUint(p.id, 10), taskref.Format(p.id)} {
			if got := list(typed); len(got) != 1 || got[0].ID != strconv.FormatUint(p.id, 10) {
				t.Fatalf("id_prefix=%s (task %d): %+v", typed, p.id, got)
			}
		}
	}
	// Two characters are shared by about a hundred of the tasks: a page
	// of them, each beginning with what was typed.
	if got := list(all[0].short[:2]); len(got) != 4 {
		t.Fatalf("id_prefix=%s: %d tasks", all[0].short[:2], len(got))
	} else {
		for _, tk := range got {
			id, _ := strconv.ParseUint(tk.ID, 10, 64)
			if taskref.Short(id)[:2] != all[0].short[:2] {
				t.Fatalf("id_prefix=%s answered %s", all[0].short[:2], taskref.Short(id))
			}
		}
	}
}
