package api

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	routing "shoal/route"
	"shoal/security"
	"shoal/statemachine"
	"shoal/wire"
)

// Security turns on authentication and authorization. The listener given
// to Serve must then be a TLS listener built with security.ServerTLS (the
// server reads each request's verified client certificate from it, or,
// through LimitHandshakes, the identity a session resumed from a ticket of
// security.IdentityTickets carries).
type Security struct {
	// CA is the cluster's authority: it verifies identities and issues
	// certificates to joiners. Required.
	CA *security.CA
	// Tokens holds the join secrets. Required.
	Tokens TokenStore
	// WorkerLifetime is the lifetime of certificates issued to agents.
	// Default security.DefaultWorkerLifetime (90 days).
	WorkerLifetime time.Duration
	// PeerTLS is this manager's client configuration towards its peers
	// (it presents its manager certificate): used to hand a rotated token
	// to the other managers. Nil: rotation stays on this manager.
	PeerTLS *tls.Config
	// Rand is the source of keys and serial numbers; default crypto/rand.
	Rand io.Reader
}

// TokenStore keeps the join secrets of this manager (a file in its data
// directory).
type TokenStore interface {
	Secrets() security.Secrets
	// Set replaces the secrets durably.
	Set(security.Secrets) error
}

func (sec *Security) withDefaults() {
	if sec.WorkerLifetime <= 0 {
		sec.WorkerLifetime = security.DefaultWorkerLifetime
	}
	if sec.Rand == nil {
		sec.Rand = rand.Reader
	}
}

// access says which certificates an endpoint admits.
type access uint8

const (
	accessAdmin   access = iota // admin certificates: the user API, /debug/pprof
	accessAgent                 // worker certificates, each for its own node only
	accessOpen                  // anyone: joining (the token is the credential)
	accessManager               // the other managers (a rotated token)
	accessObserve               // admin or manager certificates: /metrics
)

// peerKey is the request user value holding the caller's identity (a
// *security.Identity: the connection's own, not to be changed).
const peerKey = "shoal.peer"

// denial is a refused request: why (a metrics label) and what to tell.
type denial struct {
	status int
	reason string
	msg    string
}

// authorize checks the caller's certificate against what the endpoint
// admits, and records the caller's identity for the handler. Nil when
// security is off.
func (s *Server) authorize(ctx *fasthttp.RequestCtx, a access) *denial {
	sec := s.cfg.Security
	if sec == nil || a == accessOpen {
		return nil
	}
	id, hasLeaf, err := peerIdentity(ctx, sec.CA.ClusterID)
	if !hasLeaf {
		return &denial{fasthttp.StatusUnauthorized, "no_certificate",
			"this manager requires a client certificate of the cluster: " + wantCert(a)}
	}
	if err != nil {
		return &denial{fasthttp.StatusUnauthorized, "bad_certificate", err.Error()}
	}
	if !s.cfg.Clock.Now().Before(id.NotAfter) {
		// The client reconnects, presenting its renewed certificate.
		ctx.SetConnectionClose()
		return &denial{fasthttp.StatusUnauthorized, "expired", "the client certificate has expired: " + wantCert(a)}
	}
	ok := false
	switch a {
	case accessAdmin:
		ok = id.Role == security.RoleAdmin
	case accessAgent:
		ok = id.Role == security.RoleWorker
	case accessManager:
		ok = id.Role == security.RoleManager
	case accessObserve:
		ok = id.Role == security.RoleAdmin || id.Role == security.RoleManager
	}
	if !ok {
		return &denial{fasthttp.StatusForbidden, "wrong_role",
			fmt.Sprintf("a %s certificate may not use this endpoint: %s", id.Role, wantCert(a))}
	}
	if id.Role == security.RoleWorker && s.nodeRemoved(ctx, id.NodeID()) {
		return &denial{fasthttp.StatusGone, "removed_node", removedMsg}
	}
	ctx.SetUserValue(peerKey, id)
	return nil
}

// nodeRemoved reports whether the cluster removed node, as this replica's
// state says. A connection keeps the answer with the feed's NodeGen it
// was read at, both taken in one read of the cluster group's state (under
// its lock, as the feed counts each node change), and reads the state
// again only once NodeGen moved: a node removed after the last read
// changes NodeGen before its removal can be read, so it is refused from
// then on as before. (A read of the state at every request, a dragonboat
// StaleRead, was a share of every agent call on the leader.)
func (s *Server) nodeRemoved(ctx *fasthttp.RequestCtx, node uint64) bool {
	var kept *removedCheck
	if c, ok := ctx.Conn().(*admittedConn); ok {
		kept = &c.removed
		if v := kept.v.Load(); v != 0 && v>>1 == s.cfg.Feed.NodeGen()+1 {
			return v&1 == 1
		}
	}
	removed := false
	var gen uint64
	err := s.reads.ReadLocal(routing.ClusterGroup, func(st *statemachine.State) {
		gen = s.cfg.Feed.NodeGen()
		removed = st.NodeRemoved(statemachine.NodeID(node))
	})
	if err == nil && kept != nil { // a failed read tells nothing to keep
		v := (gen + 1) << 1
		if removed {
			v |= 1
		}
		kept.v.Store(v)
	}
	return removed
}

// removedCheck is a connection's last answer of nodeRemoved: (NodeGen+1)<<1
// | removed, 0 before the first.
type removedCheck struct{ v atomic.Uint64 }

const removedMsg = "this node was removed from the cluster; its certificate is no longer accepted: clear the agent's data directory to join as a new node"

func wantCert(a access) string {
	switch a {
	case accessAgent:
		return "agents use the node certificate they obtained with `shoal agent --join ADDR --token ...`"
	case accessManager:
		return "only managers of this cluster may"
	}
	return "use the admin certificate: --tls-dir or SHOAL_TLS_DIR pointing at a directory with ca.crt, admin.crt and admin.key (a manager's DATA-DIR/tls)"
}

// peerLeaf returns the client certificate TLS verified, if any.
// peerOnce keeps the identity a connection's client certificate names:
// the certificate a TLS 1.3 connection verified does not change (there is
// no renegotiation), and reading it again at every request (a copy of the
// connection's state, then the certificate's names) was a share of the
// agents' calls on the leader. The expiry is still checked at every
// request, and the node's removal as nodeRemoved says.
type peerOnce struct {
	once    sync.Once
	cluster string
	id      security.Identity
	hasLeaf bool
	session bool // id is a resumed session's (of cluster), taken from the connection below
	err     error
}

// peerIdentity returns the identity the request's client certificate names
// in cluster, hasLeaf false when the request came without one.
// The identity is the connection's own (not to be changed), or a new one
// on a connection that keeps none.
func peerIdentity(ctx *fasthttp.RequestCtx, cluster string) (id *security.Identity, hasLeaf bool, err error) {
	c, ok := ctx.Conn().(*admittedConn)
	// identify reads the identity; session: it is the one a resumed
	// session carries, of cluster.
	identify := func() (_ *security.Identity, hasLeaf, session bool, _ error) {
		st := ctx.TLSConnectionState()
		leaf := peerLeaf(st)
		if leaf == nil {
			if ok && st != nil && st.DidResume && len(st.PeerCertificates) == 0 {
				// A session resumed from a ticket that carries the
				// identity its certificate named, not the certificate.
				if s := c.hc.session.Load(); s != nil {
					if s.Cluster != cluster {
						return &security.Identity{}, true, false, security.ErrNoIdentity
					}
					id := s.Identity
					return &id, true, true, nil
				}
			}
			return &security.Identity{}, false, false, nil
		}
		id, err := security.Identify(leaf, cluster)
		return &id, true, false, err
	}
	if !ok {
		id, hasLeaf, _, err := identify()
		return id, hasLeaf, err
	}
	p := &c.peer
	p.once.Do(func() {
		var id *security.Identity
		id, p.hasLeaf, p.session, p.err = identify()
		p.id, p.cluster = *id, cluster
		if p.session {
			c.hc.session.Store(nil) // p keeps it from now on
		}
	})
	if p.cluster != cluster {
		if p.session { // the session's identity is p.cluster's only
			return &security.Identity{}, true, security.ErrNoIdentity
		}
		id, hasLeaf, _, err := identify()
		return id, hasLeaf, err
	}
	return &p.id, p.hasLeaf, p.err
}

func peerLeaf(st *tls.ConnectionState) *x509.Certificate {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return nil
	}
	return st.VerifiedChains[0][0]
}

// deny writes a refusal in the endpoint's dialect and counts it.
func (s *Server) deny(ctx *fasthttp.RequestCtx, a access, d *denial) {
	s.metrics.denied(d.reason)
	if a == accessAgent && strings.HasPrefix(string(ctx.Path()), "/v1/agent/") {
		code := wire.CodeForbidden
		switch d.status {
		case fasthttp.StatusUnauthorized:
			code = wire.CodeUnauthorized
		case fasthttp.StatusGone:
			code = wire.CodeNodeRemoved
		}
		_ = settleDialect(ctx) // the refusal in the request's dialect (JSON when unclear)
		s.wireFail(ctx, &wire.Error{Code: code, Message: d.msg})
		return
	}
	code := client.CodeForbidden
	if d.status == fasthttp.StatusUnauthorized {
		code = client.CodeUnauthorized
	}
	s.fail(ctx, errorf(d.status, code, "%s", d.msg))
}

// callerNode returns the node an agent request speaks for: the one its
// certificate names. A body naming another node is refused (and counted);
// without security the body's node is taken as is.
func (s *Server) callerNode(ctx *fasthttp.RequestCtx, body statemachine.NodeID) (statemachine.NodeID, error) {
	id, ok := ctx.UserValue(peerKey).(*security.Identity)
	if !ok {
		return body, nil
	}
	node := statemachine.NodeID(id.NodeID())
	if body != 0 && body != node {
		return 0, s.forbidden(fmt.Sprintf("this certificate is node %d's; it may not act for node %d", node, body))
	}
	return node, nil
}

// forbidden counts and returns a refusal of another node's data.
func (s *Server) forbidden(msg string) *wire.Error {
	s.metrics.denied("other_node")
	return &wire.Error{Code: wire.CodeForbidden, Message: msg}
}

// checkOwnTasks refuses a status batch of caller that names a task this
// replica knows to be on another node: nothing of the batch is applied.
// (The state machine refuses such a report too; this answers it with 403
// and counts it.) It reads each group the batch touches once, for all of
// that group's reports (a read per report was a share of every status
// call), and names the first report of the batch found on another node.
func (s *Server) checkOwnTasks(caller statemachine.NodeID, reports []wire.StatusReport) error {
	if s.cfg.Security == nil {
		return nil
	}
	i := foreignReport(caller, reports, s.reads.Groups(), func(g int, fn func(owner func(statemachine.TaskID) statemachine.NodeID)) {
		_ = s.reads.ReadLocal(g, func(st *statemachine.State) {
			fn(func(id statemachine.TaskID) statemachine.NodeID {
				if t := st.Task(id); t != nil {
					return t.Node
				}
				return 0
			})
		})
	})
	if i >= 0 {
		return s.forbidden(fmt.Sprintf("task %d is not assigned to node %d; a node reports only its own tasks", reports[i].Task, caller))
	}
	return nil
}

// foreignReport returns the index of the first report (in the batch's
// order) of a task that is on another node than caller, or -1. read(g,
// fn) runs fn with the owner of group g's tasks (0: unknown); it is called
// at most once per group 1..groups, for the group's reports together.
func foreignReport(caller statemachine.NodeID, reports []wire.StatusReport, groups int,
	read func(g int, fn func(owner func(statemachine.TaskID) statemachine.NodeID))) int {
	first := len(reports)
	for g := 1; g <= groups; g++ {
		from := -1 // the group's first report
		for i := range reports[:first] {
			if routing.TaskGroup(reports[i].Task) == g {
				from = i
				break
			}
		}
		if from < 0 {
			continue
		}
		read(g, func(owner func(statemachine.TaskID) statemachine.NodeID) {
			for i := from; i < first; i++ {
				if id := reports[i].Task; routing.TaskGroup(id) == g {
					if n := owner(id); n != 0 && n != caller {
						first = i
						return
					}
				}
			}
		})
	}
	if first == len(reports) {
		return -1
	}
	return first
}
