package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/manager/control"
	"shoal/security"
	"shoal/statemachine"
)

// joinState rate-limits failed joins per source address.
type joinState struct {
	mu      sync.Mutex
	limiter security.FailLimiter
}

func (s *Server) joinWait(src string) time.Duration {
	s.joins.mu.Lock()
	defer s.joins.mu.Unlock()
	return s.joins.limiter.Wait(src, s.cfg.Clock.Now())
}

func (s *Server) joinFailed(src string) {
	s.joins.mu.Lock()
	s.joins.limiter.Fail(src, s.cfg.Clock.Now())
	s.joins.mu.Unlock()
	s.metrics.joinsRefused.Inc()
}

func errNoTLS() *apiError {
	return notFound("this manager runs without TLS (--insecure or --dev): there is nothing to join with a token; start agents with `shoal agent --join ADDR` alone")
}

// join answers POST /v1/join: a joiner presenting a valid token gets a
// certificate (and, for a manager, the cluster authority).
func (s *Server) join(ctx *fasthttp.RequestCtx, _ []string) error {
	sec := s.cfg.Security
	if sec == nil {
		return errNoTLS()
	}
	src := ctx.RemoteIP().String()
	if w := s.joinWait(src); w > 0 {
		e := errorf(fasthttp.StatusTooManyRequests, client.CodeRateLimited,
			"too many failed join attempts from %s; retry in %s", src, w.Round(time.Second))
		e.retryAfter = w
		return e
	}
	var req client.JoinRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	role := security.Role(req.Role)
	if role != security.RoleWorker && role != security.RoleManager {
		return badRequest("role %q: a join is for a worker or a manager", req.Role)
	}
	tok, err := security.ParseToken(req.Token)
	if err == nil {
		err = sec.Tokens.Secrets().Verify(tok, sec.CA.Digest(), role)
	}
	if err != nil {
		s.joinFailed(src)
		return errorf(fasthttp.StatusUnauthorized, client.CodeJoinRefused, "%s", err.Error())
	}
	pub, err := security.ParseCertRequest([]byte(req.CSR))
	if err != nil {
		return badRequest("%v", err)
	}
	// A join creates a node and signs a certificate: bounded, so a fleet
	// joining at once is spread out instead of piling up past the joiners'
	// deadlines (whose retries would join again).
	select {
	case s.joinSlots <- struct{}{}:
		defer func() { <-s.joinSlots }()
	default:
		e := errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable, "too many nodes are joining at once; retry later")
		e.retryAfter = time.Second + time.Duration(rand.Int64N(int64(2*time.Second)))
		return e
	}
	if role == security.RoleManager {
		return s.joinManager(ctx, &req, pub)
	}
	return s.joinWorker(ctx, &req, pub)
}

// joinWorker creates the node (the cluster assigns its ID) and issues its
// certificate.
func (s *Server) joinWorker(ctx *fasthttp.RequestCtx, req *client.JoinRequest, pub *ecdsa.PublicKey) error {
	sec := s.cfg.Security
	if req.Node == nil || req.Node.Hostname == "" {
		return badRequest("a worker's join needs its node's hostname")
	}
	key, err := joinKey(pub, req.Node.Hostname)
	if err != nil {
		return badRequest("the certificate request's key: %v", err)
	}
	c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// The key makes a join asked again (of any manager) find the node of
	// the first; creating a node that exists changes nothing.
	res, err := s.cfg.Submitter.Submit(c, statemachine.Command{Kind: statemachine.CmdReserveNodeID, Name: key})
	if err != nil {
		return fromErr(err)
	}
	id := statemachine.NodeID(res.ID)
	spec := control.NodeSpec{Hostname: req.Node.Hostname, Labels: req.Node.Labels, CPU: req.Node.CPU,
		Memory: req.Node.Memory}.Node(id)
	// The service groups learn of the node from the outbox duty; the join
	// need not wait for them.
	if _, err := submitted(s.cfg.Submitter.SubmitBeforeFanout(c, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: spec})); err != nil {
		return err
	}
	chain, err := sec.CA.Issue(sec.Rand, security.Request{Role: security.RoleWorker, Name: strconv.FormatUint(uint64(id), 10),
		Key: pub, Lifetime: sec.WorkerLifetime}, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	s.metrics.joins.Inc()
	s.cfg.Logf("api: node %d (%s) joined from %s", id, req.Node.Hostname, ctx.RemoteIP())
	return s.reply(ctx, fasthttp.StatusOK, nil, client.JoinAnswer{NodeID: uint64(id),
		Cert: string(security.CertPEM(chain...)), CA: string(security.CertPEM(sec.CA.Root.Raw))})
}

// joinManager issues a manager certificate for the replica and hands over
// the cluster authority.
func (s *Server) joinManager(ctx *fasthttp.RequestCtx, req *client.JoinRequest, pub *ecdsa.PublicKey) error {
	sec := s.cfg.Security
	if req.Replica == 0 {
		return badRequest("a manager's join needs its replica ID")
	}
	if err := s.sameGroups(req.Groups); err != nil {
		return err
	}
	if req.Member {
		// Membership first: a join that cannot be added gets no credentials,
		// and a retried join finds the change done.
		if err := s.addMember(req.Replica, req.RaftAddr, ctx.RemoteIP().String()); err != nil {
			return err
		}
	}
	var hosts []string
	for _, a := range []string{req.RaftAddr, req.APIAddr} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	now := s.cfg.Clock.Now()
	chain, err := sec.CA.Issue(sec.Rand, security.Request{Role: security.RoleManager, Name: strconv.FormatUint(req.Replica, 10),
		Key: pub, Hosts: hosts}, now)
	if err != nil {
		return err
	}
	akey, err := security.NewKey(sec.Rand)
	if err != nil {
		return err
	}
	admin, err := sec.CA.Issue(sec.Rand, security.Request{Role: security.RoleAdmin, Name: "admin", Key: &akey.PublicKey}, now)
	if err != nil {
		return err
	}
	files, err := sec.CA.Files()
	if err != nil {
		return err
	}
	akeyPEM, err := security.KeyPEM(akey)
	if err != nil {
		return err
	}
	secrets := sec.Tokens.Secrets()
	s.metrics.joins.Inc()
	s.cfg.Logf("api: manager replica %d joined from %s", req.Replica, ctx.RemoteIP())
	return s.reply(ctx, fasthttp.StatusOK, nil, client.JoinAnswer{
		Cert: string(security.CertPEM(chain...)), CA: string(files.Root),
		Manager: &client.ManagerKit{RootKey: string(files.RootKey), ManagersCA: string(files.Managers),
			ManagersKey: string(files.ManagersKey), WorkerSecret: secrets.Worker.Text(), ManagerSecret: secrets.Manager.Text(),
			AdminCert: string(security.CertPEM(admin...)), AdminKey: string(akeyPEM)}})
}

// agentRenew answers POST /v1/renew: a worker gets a fresh certificate for
// the node its current one names (a removed node is refused before).
func (s *Server) agentRenew(ctx *fasthttp.RequestCtx, _ []string) error {
	sec := s.cfg.Security
	if sec == nil {
		return errNoTLS()
	}
	id, ok := ctx.UserValue(peerKey).(*security.Identity)
	if !ok {
		return errorf(fasthttp.StatusUnauthorized, client.CodeUnauthorized, "renewal needs the current node certificate")
	}
	var req client.RenewRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	pub, err := security.ParseCertRequest([]byte(req.CSR))
	if err != nil {
		return badRequest("%v", err)
	}
	chain, err := sec.CA.Issue(sec.Rand, security.Request{Role: id.Role, Name: id.Name, Key: pub,
		Lifetime: sec.WorkerLifetime}, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	s.metrics.renewals.Inc()
	return s.reply(ctx, fasthttp.StatusOK, nil, client.RenewAnswer{Cert: string(security.CertPEM(chain...))})
}

func tokenRole(arg string) (security.Role, error) {
	switch r := security.Role(arg); r {
	case security.RoleWorker, security.RoleManager:
		return r, nil
	}
	return "", notFound("no token for %q: there is a worker token and a manager token", arg)
}

func (s *Server) tokenDoc(role security.Role) client.TokenDoc {
	sec, _ := s.cfg.Security.Tokens.Secrets().For(role)
	return client.TokenDoc{Role: string(role),
		Token: security.Token{Digest: s.cfg.Security.CA.Digest(), Secret: sec}.String()}
}

// showToken answers GET /v1/tokens/ROLE (admin only).
func (s *Server) showToken(ctx *fasthttp.RequestCtx, args []string) error {
	if s.cfg.Security == nil {
		return errNoTLS()
	}
	role, err := tokenRole(args[0])
	if err != nil {
		return err
	}
	return s.reply(ctx, fasthttp.StatusOK, nil, s.tokenDoc(role))
}

// rotateToken answers POST /v1/tokens/ROLE/rotate (admin only): a new
// secret for new joins (certificates already issued stay valid), handed to
// the other managers.
func (s *Server) rotateToken(ctx *fasthttp.RequestCtx, args []string) error {
	sec := s.cfg.Security
	if sec == nil {
		return errNoTLS()
	}
	role, err := tokenRole(args[0])
	if err != nil {
		return err
	}
	secrets := sec.Tokens.Secrets()
	fresh, err := security.NewSecret(sec.Rand)
	if err != nil {
		return err
	}
	if role == security.RoleWorker {
		secrets.Worker = fresh
	} else {
		secrets.Manager = fresh
	}
	if err := sec.Tokens.Set(secrets); err != nil {
		return fmt.Errorf("store the rotated token: %w", err)
	}
	doc := s.tokenDoc(role)
	doc.Unsynced = s.pushTokens(secrets)
	s.cfg.Logf("api: the %s join token was rotated", role)
	return s.reply(ctx, fasthttp.StatusOK, nil, doc)
}

// peerTokens answers POST /v1/tokens/peer (managers only).
func (s *Server) peerTokens(ctx *fasthttp.RequestCtx, _ []string) error {
	sec := s.cfg.Security
	if sec == nil {
		return errNoTLS()
	}
	var doc client.PeerTokens
	if err := decodeJSON(ctx, &doc); err != nil {
		return err
	}
	w, err1 := security.ParseSecret(doc.WorkerSecret)
	m, err2 := security.ParseSecret(doc.ManagerSecret)
	if err := errors.Join(err1, err2); err != nil {
		return badRequest("the secrets are malformed")
	}
	if err := sec.Tokens.Set(security.Secrets{Worker: w, Manager: m}); err != nil {
		return fmt.Errorf("store the rotated token: %w", err)
	}
	return s.reply(ctx, fasthttp.StatusOK, nil, map[string]bool{"stored": true})
}

// joinKey names a worker's join: its certificate key and hostname, hashed.
// A joiner keeps its key across retries (client.JoinRetrying), so every
// attempt carries the same name.
func joinKey(pub *ecdsa.PublicKey, hostname string) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(der)
	h.Write([]byte{0})
	h.Write([]byte(hostname))
	return hex.EncodeToString(h.Sum(nil)), nil
}
