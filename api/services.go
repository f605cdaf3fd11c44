package api

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/statemachine"
)

func (s *Server) listServices(ctx *fasthttp.RequestCtx, _ []string) error {
	perPage, after, err := page(ctx)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	var items []client.Service
	cur, err := s.read(s.serviceGroups(), func(g int, st *statemachine.State) {
		for _, id := range st.ServiceIDs() {
			svc := st.Service(id)
			if svc.Spec.Name > after {
				items = append(items, renderService(g, st, svc))
			}
		}
	})
	if err != nil {
		return err
	}
	slices.SortFunc(items, func(a, b client.Service) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	out := client.List[client.Service]{Items: items}
	if len(items) > perPage {
		out.Items = items[:perPage]
		out.NextToken = items[perPage-1].Spec.Name
	}
	if out.Items == nil {
		out.Items = []client.Service{}
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, out)
}

func (s *Server) getService(ctx *fasthttp.RequestCtx, args []string) error {
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	name := args[0]
	var doc *client.Service
	g := s.reads.GroupOfService(name)
	cur, err := s.read([]int{g}, func(g int, st *statemachine.State) {
		if svc := st.ServiceByName(name); svc != nil {
			d := renderService(g, st, svc)
			doc = &d
		}
	})
	if err != nil {
		return err
	}
	if doc == nil {
		return notFound("service %q does not exist", name)
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, doc)
}

func (s *Server) createService(ctx *fasthttp.RequestCtx, _ []string) error {
	var d client.ServiceSpec
	if err := decodeJSON(ctx, &d); err != nil {
		return err
	}
	sp, err := toSpec(&d)
	if err != nil {
		return err
	}
	return s.writeService(ctx, statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &sp}, sp.Name, fasthttp.StatusCreated)
}

// writeService submits a service command and answers with the service as
// applied.
func (s *Server) writeService(ctx *fasthttp.RequestCtx, cmd statemachine.Command, name string, status int) error {
	if _, err := s.submit(ctx, cmd); err != nil {
		return err
	}
	return s.writtenService(ctx, name, status)
}

// writtenService answers a write with the service as this replica has it
// now.
func (s *Server) writtenService(ctx *fasthttp.RequestCtx, name string, status int) error {
	// A removed service without tasks is deleted at once: it answers as
	// removing, with no tasks.
	doc := client.Service{Spec: client.ServiceSpec{Name: name}, Removing: true, Tasks: map[string]int{}}
	g := s.reads.GroupOfService(name)
	cur, err := s.read([]int{g}, func(g int, st *statemachine.State) {
		if svc := st.ServiceByName(name); svc != nil {
			doc = renderService(g, st, svc)
		}
	})
	if err != nil {
		return err
	}
	return s.reply(ctx, status, cur, doc)
}

// checkIndex reads ?check_index= (0 when absent).
func checkIndex(ctx *fasthttp.RequestCtx) (uint64, error) {
	v := string(ctx.QueryArgs().Peek("check_index"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, badRequest("?check_index=%q must be the service's modify_index (a positive number)", v)
	}
	return n, nil
}

func (s *Server) updateService(ctx *fasthttp.RequestCtx, args []string) error {
	var d client.ServiceSpec
	if err := decodeJSON(ctx, &d); err != nil {
		return err
	}
	if d.Name == "" {
		d.Name = args[0]
	}
	if d.Name != args[0] {
		return invalidSpec("name", "the spec names service %q but the path names %q; a service cannot be renamed", d.Name, args[0])
	}
	sp, err := toSpec(&d)
	if err != nil {
		return err
	}
	ci, err := checkIndex(ctx)
	if err != nil {
		return err
	}
	return s.writeService(ctx, statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: &sp, Seq: ci}, sp.Name, fasthttp.StatusOK)
}

// scaleRequest is the body of POST /v1/services/{name}/scale.
type scaleRequest struct {
	Replicas *uint32 `json:"replicas"`
}

func (s *Server) scaleService(ctx *fasthttp.RequestCtx, args []string) error {
	var req scaleRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	if req.Replicas == nil {
		return invalidSpec("replicas", `scale needs {"replicas": N}`)
	}
	ci, err := checkIndex(ctx)
	if err != nil {
		return err
	}
	name := args[0]
	// Without ?check_index= the spec is read and written back with its new
	// count; a change that lands in between (the orchestrator advancing a
	// rolling update, another client) makes the write stale, and the scale
	// is made again on the fresh spec, so it never overwrites that change
	// and the caller is not asked to retry what they did not read.
	for attempt := 1; ; attempt++ {
		res, err := s.scaleOnce(ctx, name, ci, *req.Replicas)
		if err == nil || ci != 0 || res.Code != statemachine.CodeStale || attempt == scaleAttempts {
			if err != nil {
				return err
			}
			return s.writtenService(ctx, name, fasthttp.StatusOK)
		}
	}
}

// scaleAttempts bounds the scale's re-reads after a concurrent change: each
// stale write means another write landed, so n writers at once need at most
// n attempts.
const scaleAttempts = 16

// scaleOnce reads service name's spec and submits it with replicas
// (checked against ci, or against the index it was read at).
func (s *Server) scaleOnce(ctx *fasthttp.RequestCtx, name string, ci uint64, replicas uint32) (statemachine.Result, error) {
	var sp *statemachine.ServiceSpec
	var modify uint64
	_, err := s.read([]int{s.reads.GroupOfService(name)}, func(_ int, st *statemachine.State) {
		if svc := st.ServiceByName(name); svc != nil {
			c := svc.Spec
			c.Command, c.Env = slices.Clone(c.Command), slices.Clone(c.Env)
			c.Networks, c.Constraints = slices.Clone(c.Networks), slices.Clone(c.Constraints)
			c.Placement.Preferences = slices.Clone(c.Placement.Preferences)
			c.Labels = maps.Clone(c.Labels)
			sp, modify = &c, svc.ModifyIndex
		}
	})
	if err != nil {
		return statemachine.Result{}, err
	}
	if sp == nil {
		return statemachine.Result{}, notFound("service %q does not exist", name)
	}
	if sp.Mode == statemachine.ModeGlobal {
		return statemachine.Result{}, invalidSpec("replicas", "service %q is global: it runs one task per node and cannot be scaled", name)
	}
	if ci == 0 {
		ci = modify // the spec was read at this index: never overwrite a concurrent update
	}
	sp.Replicas = replicas
	return s.submit(ctx, statemachine.Command{Kind: statemachine.CmdUpdateService, Spec: sp, Seq: ci})
}

func (s *Server) rollbackService(ctx *fasthttp.RequestCtx, args []string) error {
	return s.writeService(ctx, statemachine.Command{Kind: statemachine.CmdRollbackService, Name: args[0]}, args[0], fasthttp.StatusOK)
}

func (s *Server) removeService(ctx *fasthttp.RequestCtx, args []string) error {
	return s.writeService(ctx, statemachine.Command{Kind: statemachine.CmdRemoveService, Name: args[0]}, args[0], fasthttp.StatusOK)
}
