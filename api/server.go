package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/internal/clock"
	"shoal/internal/jsoncodec"
	"shoal/manager/control"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Config configures a Server. Zero values take the defaults named on each
// field.
type Config struct {
	// Reads reads the groups' state (read.go). Required.
	Reads Reader
	// Leaders says who leads each group and whether this replica is in
	// contact with the cluster group's quorum (quorum.go). Required.
	Leaders Leaders
	// Self says which replica this is and whether it leads (status.go).
	// Required.
	Self Self
	// Replicas changes and lists the groups' members (replicas.go).
	// Required.
	Replicas Replicas
	// Stats counts proposals and leader changes per group (metrics.go).
	// Required.
	Stats RaftStats
	// ToGroup commits a command to one group, with no precheck or fan-out
	// (report.go: a node's sync). Required.
	ToGroup GroupSubmitter
	// ClockBound bounds the difference between two replicas' clocks; a
	// write's request ID says it cannot apply after its deadline plus
	// this bound (requests.go).
	ClockBound time.Duration
	// Submitter submits users' and agents' commands. Required.
	Submitter Submitter
	// Feed follows what the engine applies; its OnApply must be wired into
	// the engine's Config.OnApply. Required.
	Feed *control.Feed
	// Monitor answers heartbeats while this replica leads (agent.go).
	// Required for the agent endpoints.
	Monitor Monitor
	// Placement, if set, explains why pending tasks stay pending (leader
	// only; tasks.go).
	Placement Placement
	// Clock stamps heartbeats and times waits. Default: the wall clock.
	Clock clock.Clock
	// Pprof serves /debug/pprof/ when set. Default off.
	Pprof bool
	// SyncInterval is pushed to agents at session start. Default 1m.
	SyncInterval time.Duration
	// MaxSessionSetups bounds concurrent session setups; above it agents
	// get 503 with Retry-After. Default 64.
	MaxSessionSetups int
	// MaxJoins bounds concurrent joins (each creates a node through two
	// Raft commits and signs a certificate); above it joiners get 503 with
	// Retry-After. They have slots of their own: a join waits on commits,
	// and sharing the session slots left a fleet's session opens, which
	// commit nothing, refused behind them. Default 256.
	MaxJoins int
	// MaxBody is the largest request body accepted, in bytes. Default 1 MiB
	// plus framing.
	MaxBody int
	// Security, if set, requires client certificates of the cluster and
	// admits each endpoint's roles only (see auth.go); Serve must then get a
	// TLS listener. Nil: plain HTTP, no authentication (serve --dev and
	// --insecure).
	Security *Security
	// Logs bounds the log broker (task output on its way to users,
	// docs/logs.md). Zero values take control.LogConfig's defaults.
	Logs control.LogConfig
	// Relay tunes the heartbeat relay of a follower (relay.go); NoRelay
	// turns it off: a follower refuses heartbeats, naming the leader.
	Relay   control.RelayConfig
	NoRelay bool
	// Logf receives one line per notable event. Default: discard.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = time.Minute
	}
	if c.MaxSessionSetups <= 0 {
		c.MaxSessionSetups = 64
	}
	if c.MaxJoins <= 0 {
		c.MaxJoins = 256
	}
	if c.MaxBody <= 0 {
		c.MaxBody = wire.MaxFrame + 64<<10
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Security != nil {
		sec := *c.Security
		sec.withDefaults()
		c.Security = &sec
	}
	return c
}

// Submitter submits commands as users and agents expect (the leader
// duties' submitter over the engine): a removal is checked with every
// service group first, and a node or network change reaches every service
// group before SubmitMany and Submit return; SubmitBeforeFanout returns
// once the cluster group applied it.
type Submitter interface {
	Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
	SubmitMany(ctx context.Context, cmds []statemachine.Command) []routing.Outcome
	SubmitBeforeFanout(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
}

// Server serves the API of one manager replica.
type Server struct {
	cfg       Config
	reads     Reader
	leaders   Leaders
	self      Self
	replicas  Replicas
	stats     RaftStats
	toGroup   GroupSubmitter
	srv       *fasthttp.Server
	metrics   *metrics
	setups    chan struct{} // session setup slots
	joinSlots chan struct{} // join slots
	closed    chan struct{}
	once      sync.Once

	tableOnce  sync.Once
	routeTable []route
	joins      joinState

	// agents is the agent protocol; stream, its assignment stream,
	// answers the agents' polls. ctx ends (and the parked polls end) when
	// the server closes.
	agents *control.Agents
	stream *control.Stream
	ctx    context.Context
	cancel context.CancelFunc

	logs       *control.LogBroker // logs.go
	eventLines eventCache         // renders shared by the event streams (eventlines.go)
	peerOnce   sync.Once
	peerHC     *http.Client
	peerScheme string
}

// New returns a server; call Serve to answer requests.
func New(cfg Config) (*Server, error) {
	if cfg.Reads == nil || cfg.Leaders == nil || cfg.Self == nil || cfg.Replicas == nil || cfg.Stats == nil ||
		cfg.ToGroup == nil || cfg.Submitter == nil || cfg.Feed == nil {
		return nil, errors.New("api: reads, leaders, self, replicas, stats, a group submitter, a submitter and a feed are required")
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, reads: cfg.Reads, leaders: cfg.Leaders, self: cfg.Self, replicas: cfg.Replicas,
		stats: cfg.Stats, toGroup: cfg.ToGroup, closed: make(chan struct{}),
		setups: make(chan struct{}, cfg.MaxSessionSetups), joinSlots: make(chan struct{}, cfg.MaxJoins)}
	s.logs = control.NewLogBroker(cfg.Logs)
	var mon control.Monitor // nil unless the server has one
	if cfg.Monitor != nil {
		mon = cfg.Monitor
	}
	link := relayLink(cfg) // nil: no relay
	s.agents = control.NewAgents(control.AgentsConfig{Cluster: newAgentCluster(cfg),
		Leaders: cfg.Leaders, Self: cfg.Self, Feed: cfg.Feed, Monitor: mon, Logs: s.logs, Clock: cfg.Clock,
		SyncInterval: cfg.SyncInterval, Logf: cfg.Logf, Link: link, Relay: cfg.Relay})
	s.stream = s.agents.Stream()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.metrics = newMetrics(s)
	go s.watchQuorum()
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		Name:               "shoal",
		Logger:             logger(cfg.Logf),
		MaxRequestBodySize: cfg.MaxBody,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				s.fail(ctx, errorf(fasthttp.StatusRequestEntityTooLarge, client.CodeTooLarge,
					"request body is over the limit of %d bytes", cfg.MaxBody))
				return
			}
			s.fail(ctx, badRequest("malformed request: %v", err))
		},
	}
	connSettings(s.srv)
	return s, nil
}

// connSettings sets what the API server keeps per connection, and for how
// long (BenchmarkHeapPerAgent measures it with agents' connections).
func connSettings(srv *fasthttp.Server) {
	srv.ReadTimeout = 6 * time.Minute
	srv.IdleTimeout = 2 * time.Minute
	// Most connections are agents' keep-alives between heartbeats: a
	// leader of 10,000 agents held two 4 KiB buffers for each (about
	// 160 MB) while they sat idle. Released between requests instead.
	srv.ReduceMemoryUsage = true
	srv.ConnState = TrackIdle
}

// Serve answers requests on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(ln)
	select {
	case <-s.closed:
		return nil
	default:
		return err
	}
}

// Close stops the server: open long polls and event streams end. It waits
// for requests in progress, at most closeWait: a client's idle keep-alive
// connection could otherwise hold it until that client gave up on it (90s
// for shoal's own).
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.cancel()
	})
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if err := s.srv.ShutdownWithContext(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// closeWait bounds Close's wait for requests in progress.
const closeWait = 3 * time.Second

type handlerFunc func(ctx *fasthttp.RequestCtx, args []string) error

type route struct {
	method  string
	pattern []string // "*" matches one segment
	name    string   // metrics label
	h       handlerFunc
	access  access // which certificates may call it (with Security)
	metrics *routeMetrics
}

func (s *Server) routes() []route {
	r := func(method, path, name string, h handlerFunc) route {
		a := accessAdmin
		switch {
		case strings.HasPrefix(path, "/v1/agent/"), path == "/v1/renew":
			a = accessAgent
		case path == "/v1/join":
			a = accessOpen
		case path == "/v1/tokens/peer", path == "/v1/logs/peer", path == relayPath:
			a = accessManager
		case path == "/metrics":
			a = accessObserve
		}
		return route{method, strings.Split(strings.Trim(path, "/"), "/"), name, h, a, &routeMetrics{}}
	}
	return []route{
		r("GET", "/v1/status", "status", s.getStatus),
		r("GET", "/v1/services", "services_list", s.listServices),
		r("POST", "/v1/services", "services_create", s.createService),
		r("GET", "/v1/services/*", "services_inspect", s.getService),
		r("POST", "/v1/services/*", "services_update", s.updateService),
		r("POST", "/v1/services/*/scale", "services_scale", s.scaleService),
		r("POST", "/v1/services/*/rollback", "services_rollback", s.rollbackService),
		r("DELETE", "/v1/services/*", "services_remove", s.removeService),
		r("GET", "/v1/services/*/logs", "services_logs", s.serviceLogs),
		r("GET", "/v1/tasks", "tasks_list", s.listTasks),
		r("GET", "/v1/tasks/*", "tasks_inspect", s.getTask),
		r("GET", "/v1/tasks/*/logs", "tasks_logs", s.taskLogs),
		r("GET", "/v1/nodes", "nodes_list", s.listNodes),
		r("GET", "/v1/nodes/*", "nodes_inspect", s.getNode),
		r("POST", "/v1/nodes/*", "nodes_update", s.updateNode),
		r("DELETE", "/v1/nodes/*", "nodes_remove", s.removeNode),
		r("GET", "/v1/networks", "networks_list", s.listNetworks),
		r("POST", "/v1/networks", "networks_create", s.createNetwork),
		r("GET", "/v1/networks/*", "networks_inspect", s.getNetwork),
		r("DELETE", "/v1/networks/*", "networks_remove", s.removeNetwork),
		r("GET", "/v1/events", "events", s.events),
		r("GET", "/v1/requests/*", "requests_inspect", s.getRequest),
		r("GET", "/v1/cluster/settings", "settings_show", s.getSettings),
		r("POST", "/v1/cluster/settings", "settings_update", s.updateSettings),
		r("GET", "/v1/replicas", "replicas_list", s.listReplicas),
		r("POST", "/v1/replicas", "replicas_add", s.addReplica),
		r("DELETE", "/v1/replicas/*", "replicas_remove", s.removeReplica),
		r("POST", "/v1/agent/session", "agent_session", s.agentSession),
		r("POST", "/v1/agent/heartbeat", "agent_heartbeat", s.agentHeartbeat),
		r("POST", "/v1/agent/assignments", "agent_assignments", s.agentAssignments),
		r("POST", "/v1/agent/status", "agent_status", s.agentStatus),
		r("POST", "/v1/agent/sync", "agent_sync", s.agentSync),
		r("POST", "/v1/agent/logs", "agent_logs", s.agentLogs),
		r("POST", "/v1/logs/peer", "logs_peer", s.peerLogs),
		r("POST", relayPath, "heartbeats_peer", s.relayedHeartbeats),
		r("POST", "/v1/renew", "renew", s.agentRenew),
		r("POST", "/v1/join", "join", s.join),
		r("GET", "/v1/tokens/*", "tokens_show", s.showToken),
		r("POST", "/v1/tokens/*/rotate", "tokens_rotate", s.rotateToken),
		r("POST", "/v1/tokens/peer", "tokens_peer", s.peerTokens),
		r("GET", "/metrics", "metrics", s.serveMetrics),
	}
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logf("api: %s %s: internal error: %v\n%s", ctx.Method(), ctx.Path(), r, debug.Stack())
			s.fail(ctx, errorf(fasthttp.StatusInternalServerError, client.CodeInternalFail, "internal error; the manager logged it"))
		}
	}()
	path := ctx.Path()
	if bytes.HasPrefix(path, []byte("/debug/pprof")) {
		if d := s.authorize(ctx, accessAdmin); d != nil {
			s.deny(ctx, accessAdmin, d)
			return
		}
		if !s.cfg.Pprof {
			s.fail(ctx, notFound("profiling is off; start the manager with --pprof"))
			return
		}
		servePprof(ctx)
		return
	}
	method := ctx.Method()
	pathMatched := false
	table := s.table()
	var buf [maxSegments][]byte
	segs := splitPath(path, buf[:0])
	for i := range table {
		rt := &table[i]
		args, ok := match(rt.pattern, segs)
		if !ok {
			continue
		}
		pathMatched = true
		if rt.method != string(method) {
			continue
		}
		start := time.Now()
		if d := s.authorize(ctx, rt.access); d != nil {
			s.deny(ctx, rt.access, d)
			s.metrics.observeRoute(rt.metrics, rt.name, ctx.Response.StatusCode(), time.Since(start))
			return
		}
		if err := rt.h(ctx, args); err != nil {
			s.fail(ctx, fromErr(err))
		}
		s.metrics.observeRoute(rt.metrics, rt.name, ctx.Response.StatusCode(), time.Since(start))
		return
	}
	if pathMatched {
		s.fail(ctx, errorf(fasthttp.StatusMethodNotAllowed, client.CodeMalformed, "%s is not allowed on %s", method, path))
		return
	}
	s.fail(ctx, notFound("no such endpoint: %s %s (see api/README.md)", method, path))
}

func (s *Server) table() []route {
	s.tableOnce.Do(func() { s.routeTable = s.routes() })
	return s.routeTable
}

// maxSegments is more segments than any route's path has.
const maxSegments = 8

// splitPath appends to segs the segments of path, its slashes at either
// end left out (as strings.Split of strings.Trim), without copying them;
// nil if there are more than maxSegments (no route has that many). A
// request's path is split once into a buffer on the stack and matched
// against every route where it lies.
func splitPath(path []byte, segs [][]byte) [][]byte {
	rest := bytes.Trim(path, "/")
	for {
		if len(segs) == maxSegments {
			return nil
		}
		i := bytes.IndexByte(rest, '/')
		if i < 0 {
			return append(segs, rest)
		}
		segs, rest = append(segs, rest[:i]), rest[i+1:]
	}
}

// match matches a path's segments against pattern and returns the
// segments "*" matched (only those are copied).
func match(pattern []string, segs [][]byte) ([]string, bool) {
	if len(pattern) != len(segs) {
		return nil, false
	}
	var args []string
	for i, p := range pattern {
		switch {
		case p == "*":
			if len(segs[i]) == 0 {
				return nil, false
			}
			args = append(args, string(segs[i]))
		case p != string(segs[i]):
			return nil, false
		}
	}
	return args, true
}

// fail writes an error answer.
func (s *Server) fail(ctx *fasthttp.RequestCtx, e *apiError) {
	if e.retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", fmt.Sprint(int(max(e.retryAfter/time.Second, 1))))
	}
	b := client.ErrorBody{Error: e.msg, Code: e.code, Field: e.field, RequestID: e.requestID}
	if e.requestID != "" {
		b.Deadline, b.NotAfter = &e.deadline, &e.notAfter
	}
	body, _ := json.Marshal(b)
	ctx.SetStatusCode(e.status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(body, '\n'))
}

// reply writes a JSON document with the cursor it reflects.
func (s *Server) reply(ctx *fasthttp.RequestCtx, status int, cur wire.Cursor, v any) error {
	body, err := jsoncodec.Marshal(v)
	if err != nil {
		return err
	}
	if cur != nil {
		ctx.Response.Header.Set("X-Shoal-Index", cur.Token())
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(body, '\n'))
	return nil
}

// decodeJSON reads the request body into v, strictly.
func decodeJSON(ctx *fasthttp.RequestCtx, v any) error {
	body := ctx.PostBody()
	if len(body) == 0 {
		return badRequest("request body is empty; send a JSON document")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body is not valid: %v", err)
	}
	if dec.More() {
		return badRequest("request body holds more than one JSON document")
	}
	return nil
}

// submitted turns a submission's outcome into the API's error: the state
// machine's refusal, else the engine's failure.
func submitted(res statemachine.Result, err error) (statemachine.Result, error) {
	if res.Code != statemachine.CodeOK {
		return res, fromResult(res)
	}
	if err != nil {
		return res, fromErr(err)
	}
	return res, nil
}

// logger adapts Logf to fasthttp's logger.
type logger func(format string, args ...any)

// A connection this replica closed itself (one idle at the connection cap,
// see Guard, or at shutdown) is not news: fasthttp's error for it is not
// logged.
//
// A client speaking TLS to a plain-HTTP API (a CLI given --tls-dir against
// `serve --dev` or --insecure) sends a ClientHello, which fasthttp reports
// with the whole hello escaped, about 4 KB on one line: it is said in one
// short line instead.
func (l logger) Printf(format string, args ...any) {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, net.ErrClosed) {
			return
		}
		if err, ok := a.(error); ok && strings.Contains(err.Error(), `unsupported http request method "\x16\x03`) {
			from := "a client"
			if len(args) >= 2 {
				from = fmt.Sprintf("the client at %v", args[1])
			}
			l("api: %s spoke TLS to this plain-HTTP API (its --tls-dir or SHOAL_TLS_DIR is for a cluster with TLS); connection closed", from)
			return
		}
	}
	l("api: "+format, args...)
}
