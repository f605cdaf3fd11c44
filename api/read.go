package api

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Reader reads a group's state as this replica applied it (ReadLocal), or
// after a read barrier (Read: everything the group committed before the
// call is applied here first; it needs a quorum), and says how many
// service groups there are and which one holds a service. fn runs under
// the group's read lock, which the apply holds for writing while it feeds
// the Feed: the feed's lock-order contract (control.Feed) rests on it.
// The engine implements it.
type Reader interface {
	ReadLocal(group int, fn func(*statemachine.State)) error
	Read(ctx context.Context, group int, fn func(*statemachine.State)) error
	Groups() int
	GroupOfService(name string) int
}

// maxWait caps a blocking read's ?wait=.
const maxWait = 5 * time.Minute

// waitFor prepares a read: it blocks until some group applied past the
// request's ?index= (or its ?wait= ends; without ?index= it does not
// wait), then, with ?consistent=true, until this replica applied
// everything every group had committed by then (a read index per group;
// 503 without a quorum), and says in headers how stale the answer may
// be: X-Shoal-Known-Leader (whether this replica knows the cluster
// group's leader) and X-Shoal-Last-Contact (milliseconds since that
// leader last spoke to this replica; 0 on the leader).
func (s *Server) waitFor(ctx *fasthttp.RequestCtx) error {
	if err := s.waitIndex(ctx); err != nil {
		return err
	}
	return s.readHeaders(ctx)
}

// readHeaders sets the staleness headers and, with ?consistent=true,
// waits for the read barrier.
func (s *Server) readHeaders(ctx *fasthttp.RequestCtx) error {
	c := s.leaders.Contact(routing.ClusterGroup)
	leader, _ := s.leaders.LeaderNotice(routing.ClusterGroup)
	ctx.Response.Header.Set("X-Shoal-Known-Leader", strconv.FormatBool(leader != 0 && c.OK))
	if c.LastContact >= 0 {
		ctx.Response.Header.Set("X-Shoal-Last-Contact", strconv.FormatInt(c.LastContact.Milliseconds(), 10))
	}
	switch v := string(ctx.QueryArgs().Peek("consistent")); v {
	case "", "false":
		return nil
	case "true":
	default:
		return badRequest("?consistent=%q must be true or false", v)
	}
	bc, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	for g := 0; g <= s.reads.Groups(); g++ {
		if err := s.reads.Read(bc, g, func(*statemachine.State) {}); err != nil {
			e := fromErr(err)
			if e.status == fasthttp.StatusServiceUnavailable {
				e.msg = "a consistent read needs a quorum of the cluster, and this manager cannot reach one now; retry, or read without ?consistent=true (possibly stale)"
			}
			return e
		}
	}
	return nil
}

// waitIndex blocks until some group applied past the request's ?index=
// (or its ?wait= ends; without ?index= it returns at once).
func (s *Server) waitIndex(ctx *fasthttp.RequestCtx) error {
	tok := string(ctx.QueryArgs().Peek("index"))
	if tok == "" {
		return nil
	}
	want, err := wire.ParseCursor(tok)
	if err != nil {
		return badRequest("?index=%q is not an index this API gave out (use the X-Shoal-Index of an earlier answer)", tok)
	}
	wait := maxWait
	if w := string(ctx.QueryArgs().Peek("wait")); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return badRequest("?wait=%q is not a duration (use e.g. 30s or 5m)", w)
		}
		wait = min(d, maxWait)
	}
	// A little jitter so that many clients with the same wait do not all
	// come back at once.
	wait += time.Duration(rand.Int64N(int64(wait/16) + 1))
	timer := s.cfg.Clock.NewTimer(wait)
	defer timer.Stop()
	for {
		applied, changed := s.cfg.Feed.Changed()
		if wire.Cursor(applied).Passed(want) {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C():
			return nil
		case <-s.closed:
			return nil
		}
	}
}

// read runs fn over each listed group's applied state and returns the
// cursor the answer reflects: those groups' applied indexes, the feed's for
// the others.
func (s *Server) read(groups []int, fn func(g int, st *statemachine.State)) (wire.Cursor, error) {
	cur := wire.Cursor(s.cfg.Feed.Applied())
	for _, g := range groups {
		err := s.reads.ReadLocal(g, func(st *statemachine.State) {
			fn(g, st)
			if g < len(cur) {
				cur[g] = max(cur[g], st.LastIndex())
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// serviceGroups lists every service group.
func (s *Server) serviceGroups() []int {
	gs := make([]int, s.reads.Groups())
	for i := range gs {
		gs[i] = i + 1
	}
	return gs
}

// page reads ?per_page= (default 1000, at most 10,000) and ?next_token=.
func page(ctx *fasthttp.RequestCtx) (perPage int, after string, err error) {
	perPage = 1000
	if v := string(ctx.QueryArgs().Peek("per_page")); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > 10000 {
			return 0, "", badRequest("?per_page=%q must be a number from 1 to 10000", v)
		}
		perPage = n
	}
	return perPage, string(ctx.QueryArgs().Peek("next_token")), nil
}
