package api

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/internal/taskref"
	"shoal/statemachine"
)

// Placement explains why pending tasks stay pending: Unplaced returns, by
// service name, why the scheduler driver's last run left some of its
// tasks pending (known on the leader only).
type Placement interface {
	Unplaced() map[string]error
}

// taskFilter is a tasks list's query.
type taskFilter struct {
	service string
	node    statemachine.NodeID
	desired *statemachine.DesiredState
	state   *statemachine.TaskState
	// id: the tasks whose printed ID begins with what the user typed
	// (?id_prefix=, internal/taskref), nil for all.
	id *taskref.Prefix
}

func parseTaskFilter(ctx *fasthttp.RequestCtx) (taskFilter, error) {
	var f taskFilter
	q := ctx.QueryArgs()
	f.service = string(q.Peek("service"))
	if q.Has("id_prefix") {
		p, err := taskref.ParsePrefix(string(q.Peek("id_prefix")))
		if err != nil {
			return f, badRequest("?id_prefix: %v", err)
		}
		f.id = &p
	}
	if v := string(q.Peek("node")); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return f, badRequest("?node=%q must be a node ID", v)
		}
		f.node = statemachine.NodeID(n)
	}
	if v := string(q.Peek("desired")); v != "" {
		d, err := parseEnum("desired", v, statemachine.DesiredRunning, statemachine.DesiredReady,
			statemachine.DesiredRunning, statemachine.DesiredShutdown, statemachine.DesiredRemove)
		if err != nil {
			return f, badRequest("?desired=%q is not a desired state (ready, running, shutdown, remove)", v)
		}
		f.desired = &d
	}
	if v := string(q.Peek("state")); v != "" {
		st, err := statemachine.ParseTaskState(v)
		if err != nil {
			return f, badRequest("?state=%q is not a task state (new, pending, assigned, ..., running, complete, failed, ...)", v)
		}
		f.state = &st
	}
	return f, nil
}

func (f taskFilter) keep(t *statemachine.Task) bool {
	return (f.node == 0 || t.Node == f.node) && (f.id == nil || f.id.Match(uint64(t.ID))) && (f.desired == nil || t.Desired == *f.desired) &&
		(f.state == nil || t.Status.State == *f.state)
}

func (s *Server) listTasks(ctx *fasthttp.RequestCtx, _ []string) error {
	f, err := parseTaskFilter(ctx)
	if err != nil {
		return err
	}
	perPage, afterTok, err := page(ctx)
	if err != nil {
		return err
	}
	var after uint64
	if afterTok != "" {
		if after, err = strconv.ParseUint(afterTok, 10, 64); err != nil {
			return badRequest("?next_token=%q is not a token this API gave out", afterTok)
		}
	}
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	groups := s.serviceGroups()
	if f.service != "" {
		groups = []int{s.reads.GroupOfService(f.service)}
	}
	var items []client.Task
	var ids []uint64
	found := f.service == ""
	cur, err := s.read(groups, func(g int, st *statemachine.State) {
		if f.service == "" && f.node == 0 && (len(ids) > perPage || uint64(g) < after>>48) {
			// A task ID's group is its top bits, and groups are read in
			// increasing order: a group below the token's holds no ID
			// past it, and once a page is full the later groups' IDs
			// are all above it.
			return
		}
		var tasks []*statemachine.Task
		switch {
		case f.service != "":
			svc := st.ServiceByName(f.service)
			if svc == nil {
				return
			}
			found = true
			tasks = st.AppendServiceTasks(tasks, svc.ID)
		case f.node != 0:
			tasks = st.NodeTasks(f.node)
		default:
			// The page's first perPage+1 tasks the filter keeps, without
			// sorting every task ID under the group's read lock.
			for _, id := range st.TaskIDsAfter(statemachine.TaskID(after), perPage+1, f.keep) {
				tasks = append(tasks, st.Task(id))
			}
		}
		// Only the first perPage+1 kept tasks past the token can be on the
		// page: render those alone (a service of 10,000 tasks rendered
		// whole for each page held hundreds of MB while a fleet's tasks
		// were read page by page).
		for _, t := range firstByID(tasks, after, f.keep, perPage+1) {
			items = append(items, renderTask(st, t, false))
			ids = append(ids, uint64(t.ID))
		}
	})
	if err != nil {
		return err
	}
	if !found {
		return notFound("service %q does not exist", f.service)
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if ids[a] < ids[b] {
			return -1
		}
		return 1
	})
	out := client.List[client.Task]{Items: make([]client.Task, 0, min(len(items), perPage))}
	for _, i := range order {
		if len(out.Items) == perPage {
			out.NextToken = strconv.FormatUint(ids[order[perPage-1]], 10)
			break
		}
		out.Items = append(out.Items, items[i])
	}
	s.explainPending(out.Items)
	return s.reply(ctx, fasthttp.StatusOK, cur, out)
}

func (s *Server) getTask(ctx *fasthttp.RequestCtx, args []string) error {
	id, err := strconv.ParseUint(args[0], 10, 64)
	g := int(id >> 48)
	if err != nil || g < 1 || g > s.reads.Groups() {
		return notFound("task %q does not exist (this endpoint takes a task's decimal \"id\"; find a task by the ID `service ps` prints with /v1/tasks?id_prefix=)", args[0])
	}
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	var doc *client.Task
	cur, err := s.read([]int{g}, func(_ int, st *statemachine.State) {
		if t := st.Task(statemachine.TaskID(id)); t != nil {
			d := renderTask(st, t, true)
			doc = &d
		}
	})
	if err != nil {
		return err
	}
	if doc == nil {
		return notFound("task %s does not exist (it may have been removed after it stopped)", args[0])
	}
	s.explainPending([]client.Task{*doc})
	return s.reply(ctx, fasthttp.StatusOK, cur, doc)
}

// explainPending fills in why pending tasks stay pending, from the
// scheduler driver's last run (known on the leader only), where the state
// has no message of its own.
func (s *Server) explainPending(tasks []client.Task) {
	if s.cfg.Placement == nil || !s.self.Leading() {
		return
	}
	why := map[string]string{}
	for name, err := range s.cfg.Placement.Unplaced() {
		why[name] = "not placed: " + err.Error()
	}
	for i := range tasks {
		if t := &tasks[i]; t.State == "pending" && t.Message == "" {
			t.Message = why[t.Service]
		}
	}
}

// firstByID returns, in ID order, the first n of tasks whose ID is above
// after and that keep accepts, filtering and sorting tasks in place (the
// callers' own slices: no second copy of a large service's tasks).
func firstByID(tasks []*statemachine.Task, after uint64, keep func(*statemachine.Task) bool, n int) []*statemachine.Task {
	kept := tasks[:0]
	for _, t := range tasks {
		if uint64(t.ID) > after && keep(t) {
			kept = append(kept, t)
		}
	}
	slices.SortFunc(kept, func(a, b *statemachine.Task) int { return cmp.Compare(a.ID, b.ID) })
	return kept[:min(len(kept), n)]
}
