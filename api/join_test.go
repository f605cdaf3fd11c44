package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/manager/control"
	"shoal/security"
	"shoal/statemachine"
	"shoal/wire"
)

// memTokens keeps join secrets in memory.
type memTokens struct {
	mu sync.Mutex
	s  security.Secrets
}

func (m *memTokens) Secrets() security.Secrets {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s
}

func (m *memTokens) Set(s security.Secrets) error {
	m.mu.Lock()
	m.s = s
	m.mu.Unlock()
	return nil
}

// tlsCluster is n managers' APIs with TLS (mutual where a client presents
// a certificate) over one cluster of groups in memory.
type tlsCluster struct {
	t      *testing.T
	ca     *security.CA
	tokens *memTokens
	r      *memReplica
	addrs  []string
}

func newTestCA(t *testing.T) *security.CA {
	t.Helper()
	ca, err := security.NewCA(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// issuePair issues a certificate of ca for req and returns it with its key.
func issuePair(t *testing.T, ca *security.CA, req security.Request) tls.Certificate {
	t.Helper()
	key, err := security.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	req.Key = &key.PublicKey
	chain, err := ca.Issue(rand.Reader, req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp, err := security.KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := security.KeyPair(security.CertPEM(chain...), kp)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func serveTLS(t *testing.T, n int) *tlsCluster {
	t.Helper()
	ca := newTestCA(t)
	w, err1 := security.NewSecret(rand.Reader)
	mgr, err2 := security.NewSecret(rand.Reader)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	m := duty.NewMemory(2, clock.Real{})
	c := &tlsCluster{t: t, ca: ca, tokens: &memTokens{s: security.Secrets{Worker: w, Manager: mgr}},
		r: &memReplica{replica: &replica{leader: 1}, m: m, sub: duty.NewSubmitter(m, nil)}}
	for i := range n {
		cert := issuePair(t, ca, security.Request{Role: security.RoleManager, Name: strconv.Itoa(i + 1), Hosts: []string{"127.0.0.1"}})
		feed := control.NewFeed(m.Groups(), nil, 1024, 16)
		s, err := New(Config{Reads: c.r, Leaders: c.r, Self: c.r, Replicas: c.r, Stats: c.r, ToGroup: c.r, Submitter: c.r,
			Feed: feed, Monitor: beats{ttl: time.Second}, Security: &Security{CA: ca, Tokens: c.tokens}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = s.Serve(tls.NewListener(ln, security.ServerTLS(func() *tls.Certificate { return &cert }, ca.RootPool())))
		}()
		t.Cleanup(func() { s.Close() })
		c.addrs = append(c.addrs, ln.Addr().String())
	}
	return c
}

// token returns the current join token of role.
func (c *tlsCluster) token(role security.Role) string {
	s, _ := c.tokens.Secrets().For(role)
	return security.Token{Digest: c.ca.Digest(), Secret: s}.String()
}

// admin returns a user API client of manager i with an admin certificate.
func (c *tlsCluster) admin(i int) *client.Client {
	cert := issuePair(c.t, c.ca, security.Request{Role: security.RoleAdmin, Name: "admin"})
	cl, err := client.NewTLS(c.addrs[i], client.NewCredentials(c.ca.Root, &cert).TLS())
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// joinWorker joins a node at manager i with the worker token and returns
// its node ID and an agent client presenting its certificate.
func (c *tlsCluster) joinWorker(ctx context.Context, i int, host string) (uint64, *client.AgentClient) {
	c.t.Helper()
	j, err := client.Join(ctx, []string{c.addrs[i]}, c.token(security.RoleWorker),
		client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: host, CPU: 64000, Memory: 1 << 40}})
	if err != nil {
		c.t.Fatalf("join %s: %v", host, err)
	}
	kp, _ := security.KeyPEM(j.Key)
	pair, err := security.KeyPair([]byte(j.Answer.Cert), kp)
	if err != nil {
		c.t.Fatal(err)
	}
	ac, err := client.NewAgentClient([]string{c.addrs[i]}, client.SharedHTTPS(4, client.NewCredentials(c.ca.Root, &pair).TLS(), 0))
	if err != nil {
		c.t.Fatal(err)
	}
	return j.Answer.NodeID, ac
}

// metric returns the value of the first /metrics line of manager i
// starting with name.
func (c *tlsCluster) metric(i int, name string) string {
	c.t.Helper()
	cert := issuePair(c.t, c.ca, security.Request{Role: security.RoleAdmin, Name: "admin"})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: client.NewCredentials(c.ca.Root, &cert).TLS()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + c.addrs[i] + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimPrefix(l, name+" ")
		}
	}
	return ""
}

func wireCode(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// A worker's join asked again with the same key and hostname (its answer
// was lost) gets the node of the first, also from another manager: one
// node per joiner, however often and whomever it asks. Another key, or the
// same key under another hostname, is another node. Two managers' APIs
// over TLS share the groups in memory.
func TestWorkerJoinAskedAgainIsOneNode(t *testing.T) {
	ctx := testCtx(t)
	c := serveTLS(t, 2)
	worker := c.token(security.RoleWorker)
	join := func(m int, host string, key *ecdsa.PrivateKey) uint64 {
		t.Helper()
		j, err := client.JoinKeyed(ctx, []string{c.addrs[m]}, worker, client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: host}}, key)
		if err != nil {
			t.Fatalf("join %s at manager %d: %v", host, m, err)
		}
		return j.Answer.NodeID
	}
	key, err := security.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	first := join(0, "n1", key)
	for _, m := range []int{0, 1} {
		if again := join(m, "n1", key); again != first {
			t.Fatalf("the join asked again of manager %d with the same key made node %d beside node %d", m, again, first)
		}
	}
	other, err := security.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	second := join(1, "n2", other)
	renamed := join(0, "n3", key)
	if second == first || renamed == first || renamed == second {
		t.Fatalf("distinct joiners share nodes: %d, %d, %d", first, second, renamed)
	}
	if n := len(c.r.m.State(0).NodeIDs()); n != 3 {
		t.Fatalf("%d nodes after five joins by three joiners, want 3", n)
	}
}

// Joins over TLS: a good token gets a certificate naming the node the
// cluster created; a mistyped secret, another cluster's token, a malformed
// token, the worker token used by a manager and a rotated-out token are
// refused with a message naming the problem (never repeating a secret);
// repeated failures are rate-limited; the user API needs an admin
// certificate.
func TestJoinTokensOverTLS(t *testing.T) {
	c := serveTLS(t, 1)
	ctx := testCtx(t)
	addrs := c.addrs
	worker := c.token(security.RoleWorker)
	nodeReq := client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: "n1"}}

	j, err := client.Join(ctx, addrs, worker, nodeReq)
	if err != nil {
		t.Fatalf("join with the worker token: %v", err)
	}
	certs, err := security.ParseCerts([]byte(j.Answer.Cert))
	if err != nil || certs[0].Subject.CommonName != strconv.FormatUint(j.Answer.NodeID, 10) ||
		certs[0].Subject.OrganizationalUnit[0] != "worker" || certs[0].Subject.Organization[0] != c.ca.ClusterID {
		t.Fatalf("certificate subject %v for node %d (%v)", certs[0].Subject, j.Answer.NodeID, err)
	}
	if n, err := c.admin(0).Node(ctx, strconv.FormatUint(j.Answer.NodeID, 10)); err != nil || n.Name != "n1" {
		t.Fatalf("the joined node is not in the cluster: %+v %v", n, err)
	}

	refused := func(name, token string, req client.JoinRequest, want string) {
		t.Helper()
		_, err := client.Join(ctx, addrs, token, req)
		if !errors.Is(err, client.ErrJoinRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: got %v, want a refusal saying %q", name, err, want)
		}
		for _, sec := range []security.Secret{c.tokens.Secrets().Worker, c.tokens.Secrets().Manager} {
			if strings.Contains(err.Error(), sec.Text()) {
				t.Fatalf("%s: the refusal repeats a secret: %v", name, err)
			}
		}
	}
	wrong := security.Token{Digest: c.ca.Digest(), Secret: security.Secret{1, 2, 3}}.String()
	refused("wrong secret", wrong, nodeReq, "does not match a current token")
	other := security.Token{Digest: newTestCA(t).Digest(), Secret: c.tokens.Secrets().Worker}.String()
	refused("another cluster's token", other, nodeReq, "does not match the join token's CA digest")
	refused("malformed token", "SHOAL-1-abc", nodeReq, "malformed")
	refused("manager with the worker token", worker,
		client.JoinRequest{Role: "manager", Replica: 4, RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"},
		"a manager joins with the manager token")

	rot, err := c.admin(0).RotateToken(ctx, "worker")
	if err != nil || rot.Token == worker || !strings.HasPrefix(rot.Token, "SHOAL-1-"+c.ca.Digest().String()) {
		t.Fatalf("rotate: %+v %v", rot, err)
	}
	refused("rotated-out token", worker, nodeReq, "rotated")
	if _, err := client.Join(ctx, addrs, rot.Token, nodeReq); err != nil {
		t.Fatalf("join with the rotated token: %v", err)
	}
	// The first node's certificate stays good after the rotation.
	kp, _ := security.KeyPEM(j.Key)
	pair, err := security.KeyPair([]byte(j.Answer.Cert), kp)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := client.NewAgentClient(addrs, client.SharedHTTPS(4, client.NewCredentials(c.ca.Root, &pair).TLS(), 0))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "n1"}}); err != nil || uint64(s.NodeID) != j.Answer.NodeID {
		t.Fatalf("session of the node joined before the rotation: %+v %v", s, err)
	}

	t.Run("user API needs an admin certificate", func(t *testing.T) {
		for _, cfg := range []struct {
			name string
			tls  *tls.Config
			want int
		}{
			{"no certificate", client.NewCredentials(c.ca.Root, nil).TLS(), http.StatusUnauthorized},
			{"worker certificate", client.NewCredentials(c.ca.Root, &pair).TLS(), http.StatusForbidden},
		} {
			cl, _ := client.NewTLS(addrs[0], cfg.tls)
			_, _, err := cl.Services(ctx, nil)
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != cfg.want {
				t.Errorf("%s: %v, want status %d", cfg.name, err, cfg.want)
			}
		}
		if _, _, err := c.admin(0).Services(ctx, nil); err != nil {
			t.Errorf("admin: %v", err)
		}
	})

	t.Run("failed joins are rate-limited", func(t *testing.T) {
		var err error
		for i := 0; i < 20; i++ {
			if _, err = client.Join(ctx, addrs, wrong, nodeReq); strings.Contains(errString(err), "too many failed join attempts") {
				break
			}
		}
		if !strings.Contains(errString(err), "too many failed join attempts") {
			t.Fatalf("20 failed joins were never limited: %v", err)
		}
	})
}

// An agent acts only for the node its certificate names: reporting another
// node's task, heartbeating or syncing for it, or opening its session is
// refused with 403, counted, and changes nothing; its own reports go
// through. Once a node is removed, its certificate is refused on every
// endpoint.
func TestAgentsActOnlyForThemselves(t *testing.T) {
	c := serveTLS(t, 2)
	ctx := testCtx(t)
	admin := c.admin(0)
	a, ac := c.joinWorker(ctx, 0, "a")
	b, bc := c.joinWorker(ctx, 1, "b")
	sessA, err := ac.OpenSession(ctx, &wire.SessionRequest{NodeID: statemachine.NodeID(a), Node: wire.NodeDescription{Hostname: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	sessB, err := bc.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "b"}})
	if err != nil || uint64(sessB.NodeID) != b {
		t.Fatalf("B's session: %+v %v (the node ID comes from the certificate)", sessB, err)
	}
	if _, err := ac.OpenSession(ctx, &wire.SessionRequest{NodeID: statemachine.NodeID(b), Node: wire.NodeDescription{Hostname: "b"}}); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A opened a session as B: %v", err)
	}
	beat := func(cl *client.AgentClient, node uint64, sid uint64) error {
		_, err := cl.Heartbeat(ctx, &wire.Heartbeat{NodeID: statemachine.NodeID(node), SessionID: sid})
		return err
	}
	if err := beat(ac, a, sessA.SessionID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(1), Command: []string{"sleep", "1"},
		Restart: &client.RestartPolicy{Condition: "none"}}); err != nil {
		t.Fatal(err)
	}
	// The scheduler's part: web's task goes to B.
	l, _, err := admin.Tasks(ctx, nil)
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("tasks: %+v %v", l.Items, err)
	}
	task := l.Items[0]
	id, _ := strconv.ParseUint(task.ID, 10, 64)
	if o := c.r.m.SubmitMany(ctx, []statemachine.Command{{Kind: statemachine.CmdAssign, Task: statemachine.TaskID(id), Node: statemachine.NodeID(b)}})[0]; o.Err() != nil {
		t.Fatal(o.Err())
	}
	report := &wire.StatusBatch{NodeID: statemachine.NodeID(a), SessionID: sessA.SessionID,
		Reports: []wire.StatusReport{{Task: statemachine.TaskID(id), State: statemachine.StateRunning}}}
	if _, err := ac.ReportStatus(ctx, report); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A reported B's task: %v, want forbidden", err)
	}
	report.NodeID = statemachine.NodeID(b)
	if _, err := ac.ReportStatus(ctx, report); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A reported B's task naming B in the body: %v, want forbidden", err)
	}
	if err := beat(ac, b, sessA.SessionID); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A heartbeat for B: %v, want forbidden", err)
	}
	if _, err := ac.Sync(ctx, &wire.SyncRequest{NodeID: statemachine.NodeID(b)}); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A synced for B: %v, want forbidden", err)
	}
	if got, _ := admin.Task(ctx, task.ID); got.State != "assigned" {
		t.Fatalf("refused reports changed the task: %s", got.State)
	}
	if n, _ := strconv.Atoi(c.metric(0, `shoal_auth_denied_total{reason="other_node"}`)); n < 5 {
		t.Fatalf("shoal_auth_denied_total{reason=\"other_node\"} = %d, want at least 5", n)
	}
	// B's own reports go through (its task runs, then completes).
	report.SessionID = sessB.SessionID
	for _, st := range []statemachine.TaskState{statemachine.StateRunning, statemachine.StateComplete} {
		report.Reports[0].State = st
		if ack, err := bc.ReportStatus(ctx, report); err != nil || ack.Results[0] != wire.ReportAccepted {
			t.Fatalf("B's own report %s: %+v %v", st, ack, err)
		}
	}

	// B is marked down (the node monitor's part) and removed: its
	// certificate is refused from then on, on every endpoint.
	if o := c.r.m.SubmitMany(ctx, []statemachine.Command{{Kind: statemachine.CmdSetNodeStatus, Node: statemachine.NodeID(b), NodeStatus: statemachine.NodeDown}})[0]; o.Err() != nil {
		t.Fatal(o.Err())
	}
	if err := admin.RemoveNode(ctx, strconv.FormatUint(b, 10)); err != nil {
		t.Fatal(err)
	}
	if err := beat(bc, b, sessB.SessionID); wireCode(err) != wire.CodeNodeRemoved {
		t.Fatalf("the removed node's heartbeat: %v", err)
	}
	if _, err := bc.Assignments(ctx, &wire.AssignmentsRequest{NodeID: statemachine.NodeID(b)}); wireCode(err) != wire.CodeNodeRemoved {
		t.Fatalf("the removed node read its assignments: %v", err)
	}
	if _, _, err := bc.Renew(ctx); wireCode(err) != wire.CodeNodeRemoved {
		t.Fatalf("the removed node renewed its certificate: %v", err)
	}
}
