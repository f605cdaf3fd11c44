package api

import (
	"bytes"
	"fmt"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/pprofhandler"

	routing "shoal/route"
	"shoal/statemachine"
)

// RaftStats counts, per group, the entries and commands this replica
// proposed and the leader changes it saw (with the current term). The
// engine implements it.
type RaftStats interface {
	Proposed(group int) (entries, commands uint64)
	LeaderChanges(group int) (changes, term uint64)
}

// metrics are the server's Prometheus metrics, in a set of their own.
type metrics struct {
	s          *Server
	set        *vm.Set
	sessions   *vm.Counter
	heartbeats *vm.Counter
	relayed    *vm.Counter
	reports    *vm.Counter
	syncs      *vm.Counter
	frames     struct{ complete, incremental *vm.Counter }
	// task output lines the log broker took and dropped.
	logLines, logDropped *vm.Counter
	// joins, refused joins and certificate renewals (with TLS).
	joins, joinsRefused, renewals *vm.Counter
	// TLS handshakes this server completed, resumed (a session ticket of
	// any manager) or full.
	handshakes struct {
		resumed, full, unused *vm.Counter
		failed                [numHandshakeFailures]*vm.Counter // by HandshakeFailure
		wait, took            *vm.Histogram
	}
	// The per-request counters and histograms, by endpoint and status: a
	// request finds its own without formatting a name or taking the set's
	// lock (417 requests of a replica waited on that lock while 10,000
	// agents reconnected).
	requests  sync.Map // endpointStatus → *vm.Counter
	durations sync.Map // endpoint → *vm.Histogram
}

type endpointStatus struct {
	endpoint string
	status   int
}

func newMetrics(s *Server) *metrics {
	// The library writes a family's # HELP and # TYPE lines only with
	// this switch on (its HELP has no text: fillHelp adds ours).
	vm.ExposeMetadata(true)
	m := &metrics{s: s, set: vm.NewSet()}
	m.sessions = m.set.NewCounter("shoal_agent_sessions_total")
	m.heartbeats = m.set.NewCounter("shoal_agent_heartbeats_total")
	m.relayed = m.set.NewCounter("shoal_agent_heartbeats_relayed_total")
	m.reports = m.set.NewCounter("shoal_agent_status_reports_total")
	m.syncs = m.set.NewCounter("shoal_agent_syncs_total")
	m.frames.complete = m.set.NewCounter(`shoal_assignment_frames_total{kind="complete"}`)
	m.frames.incremental = m.set.NewCounter(`shoal_assignment_frames_total{kind="incremental"}`)
	m.joins = m.set.NewCounter("shoal_joins_total")
	m.joinsRefused = m.set.NewCounter("shoal_joins_refused_total")
	m.renewals = m.set.NewCounter("shoal_cert_renewals_total")
	m.handshakes.resumed = m.set.NewCounter(`shoal_tls_handshakes_total{resumed="true"}`)
	m.handshakes.full = m.set.NewCounter(`shoal_tls_handshakes_total{resumed="false"}`)
	for f := range m.handshakes.failed {
		m.handshakes.failed[f] = m.set.NewCounter(`shoal_tls_handshakes_failed_total{reason="` + HandshakeFailure(f).String() + `"}`)
	}
	m.handshakes.unused = m.set.NewCounter(`shoal_tls_connections_unused_total`)
	m.handshakes.wait = m.set.NewHistogram(`shoal_tls_handshake_wait_seconds`)
	m.handshakes.took = m.set.NewHistogram(`shoal_tls_handshake_seconds`)
	m.set.NewGauge("shoal_agent_session_records", func() float64 { return float64(s.stream.Stats().Sessions) })
	m.set.NewGauge("shoal_agent_polls_parked", func() float64 { return float64(s.stream.Stats().Parked) })
	m.logLines = m.set.NewCounter("shoal_log_lines_total")
	m.logDropped = m.set.NewCounter("shoal_log_lines_dropped_total")
	m.set.NewGauge("shoal_log_subscriptions", func() float64 { return float64(s.logs.Stats().Subscriptions) })
	m.set.NewGauge("shoal_log_buffered_bytes", func() float64 { return float64(s.logs.Stats().Buffered) })
	m.set.NewGauge("go_gc_heap_live_bytes", heapLive)
	return m
}

// observe counts one request and its latency.
func (m *metrics) observe(endpoint string, status int, d time.Duration) {
	m.counter(endpoint, status).Inc()
	m.histogram(endpoint).Update(d.Seconds())
}

// observeRoute is observe of a route's request: its histogram and its
// counter of status 200 are kept in rm once made (a sync.Map lookup of
// each, by a key hashed at every request, was a share of an agent call).
func (m *metrics) observeRoute(rm *routeMetrics, endpoint string, status int, d time.Duration) {
	if status == fasthttp.StatusOK {
		c := rm.ok.Load()
		if c == nil {
			c = m.counter(endpoint, status)
			rm.ok.Store(c)
		}
		c.Inc()
	} else {
		m.counter(endpoint, status).Inc()
	}
	h := rm.hist.Load()
	if h == nil {
		h = m.histogram(endpoint)
		rm.hist.Store(h)
	}
	h.Update(d.Seconds())
}

// routeMetrics is a route's own of the per-request metrics, once made.
type routeMetrics struct {
	hist atomic.Pointer[vm.Histogram]
	ok   atomic.Pointer[vm.Counter]
}

// counter returns the requests counter of endpoint and status.
func (m *metrics) counter(endpoint string, status int) *vm.Counter {
	k := endpointStatus{endpoint, status}
	c, ok := m.requests.Load(k)
	if !ok {
		c, _ = m.requests.LoadOrStore(k, m.set.GetOrCreateCounter(fmt.Sprintf(`shoal_http_requests_total{endpoint=%q,code="%d"}`, endpoint, status)))
	}
	return c.(*vm.Counter)
}

// histogram returns the duration histogram of endpoint.
func (m *metrics) histogram(endpoint string) *vm.Histogram {
	h, ok := m.durations.Load(endpoint)
	if !ok {
		h, _ = m.durations.LoadOrStore(endpoint, m.set.GetOrCreateHistogram(fmt.Sprintf(`shoal_http_request_duration_seconds{endpoint=%q}`, endpoint)))
	}
	return h.(*vm.Histogram)
}

// denied counts a request refused by authorization, by reason.
func (m *metrics) denied(reason string) {
	m.set.GetOrCreateCounter(fmt.Sprintf(`shoal_auth_denied_total{reason=%q}`, reason)).Inc()
}

func (s *Server) serveMetrics(ctx *fasthttp.RequestCtx, _ []string) error {
	var b bytes.Buffer
	st := s.stream.Stats() // the stream counts its frames itself
	s.metrics.frames.complete.Set(st.Complete)
	s.metrics.frames.incremental.Set(st.Incremental)
	ls := s.logs.Stats() // the broker counts its lines itself
	s.metrics.logLines.Set(ls.Lines)
	s.metrics.logDropped.Set(ls.Dropped)
	s.metrics.set.WritePrometheus(&b)
	vm.WriteProcessMetrics(&b)
	if err := s.writeStateMetrics(&b); err != nil {
		return err
	}
	ctx.SetContentType("text/plain; version=0.0.4")
	ctx.SetBody(fillHelp(b.Bytes()))
	return nil
}

// writeStateMetrics writes gauges read from this replica's state: tasks per
// state, nodes per status, services, applied index and leader per group,
// each family's samples together under its HELP and TYPE.
func (s *Server) writeStateMetrics(b *bytes.Buffer) error {
	var tasks [16]int
	services := 0
	nodes := map[statemachine.NodeStatus]int{}
	type groupRow struct{ applied, leader, proposals, commands, changes, term uint64 }
	rows := make([]groupRow, s.reads.Groups()+1)
	for g := range rows {
		err := s.reads.ReadLocal(g, func(st *statemachine.State) {
			rows[g].applied = st.LastIndex()
			if g == routing.ClusterGroup {
				for _, id := range st.NodeIDs() {
					nodes[st.Node(id).Status]++
				}
				return
			}
			services += len(st.ServiceIDs())
			st.CountTasksByState(tasks[:])
		})
		if err != nil {
			return err
		}
		r := &rows[g]
		r.leader, _ = s.leaders.Leader(g)
		r.proposals, r.commands = s.stats.Proposed(g)
		r.changes, r.term = s.stats.LeaderChanges(g)
	}
	perGroup := func(name, typ string, v func(groupRow) uint64) {
		writeHead(b, name, typ)
		for g, r := range rows {
			fmt.Fprintf(b, "%s{group=\"%d\"} %d\n", name, g, v(r))
		}
	}
	perGroup("shoal_group_applied_index", "gauge", func(r groupRow) uint64 { return r.applied })
	perGroup("shoal_group_leader", "gauge", func(r groupRow) uint64 { return r.leader })
	perGroup("shoal_group_proposals_total", "counter", func(r groupRow) uint64 { return r.proposals })
	perGroup("shoal_group_proposed_commands_total", "counter", func(r groupRow) uint64 { return r.commands })
	perGroup("shoal_raft_leader_changes_total", "counter", func(r groupRow) uint64 { return r.changes })
	perGroup("shoal_raft_term", "gauge", func(r groupRow) uint64 { return r.term })
	writeHead(b, "shoal_tasks", "gauge")
	for st := statemachine.StateNew; st <= statemachine.StateOrphaned; st++ {
		fmt.Fprintf(b, "shoal_tasks{state=%q} %d\n", st.String(), tasks[st])
	}
	writeHead(b, "shoal_nodes", "gauge")
	for st := statemachine.NodeReady; st <= statemachine.NodeDown; st++ {
		fmt.Fprintf(b, "shoal_nodes{status=%q} %d\n", st.String(), nodes[st])
	}
	writeHead(b, "shoal_services", "gauge")
	fmt.Fprintf(b, "shoal_services %d\n", services)
	leading := 0
	if s.self.Leading() {
		leading = 1
	}
	writeHead(b, "shoal_leading", "gauge")
	fmt.Fprintf(b, "shoal_leading %d\n", leading)
	return nil
}

func servePprof(ctx *fasthttp.RequestCtx) { pprofhandler.PprofHandler(ctx) }

// ObserveHandshake records one TLS handshake of the server's listener
// (api.LimitHandshakes): how long it waited for its turn and ran, and
// whether it resumed a session (a fleet moving to a new leader should
// mostly resume: the managers share their ticket key).
func (s *Server) ObserveHandshake(h Handshake) {
	m := s.metrics
	switch {
	case h.Unused:
		m.handshakes.unused.Inc()
		return
	case h.Err != nil:
		m.handshakes.failed[failureOf(h.Err, h.Hello)].Inc()
	case h.Resumed:
		m.handshakes.resumed.Inc()
	default:
		m.handshakes.full.Inc()
	}
	m.handshakes.wait.Update(h.Wait.Seconds())
	if h.Took > 0 {
		m.handshakes.took.Update(h.Took.Seconds())
	}
}

// heapLive reads the bytes of heap the last garbage collection found live
// (runtime/metrics /gc/heap/live:bytes). go_memstats_heap_inuse_bytes also
// counts what died since, up to the collector's headroom (GOGC: as much
// again by default), so it swings with the moment it is read.
func heapLive() float64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}
