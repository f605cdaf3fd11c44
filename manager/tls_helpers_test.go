package manager

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/engine"
	"shoal/security"
	"shoal/security/tlsdir"
)

// newTokens returns the cluster's join secrets in a token file of the
// test's own, as a manager keeps them.
func newTokens(t testing.TB) *tlsdir.TokenFile {
	t.Helper()
	w, err1 := security.NewSecret(rand.Reader)
	m, err2 := security.NewSecret(rand.Reader)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	f, err := tlsdir.Dir(t.TempDir()).CreateTokens(security.Secrets{Worker: w, Manager: m})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newTestCA(t testing.TB) *security.CA {
	t.Helper()
	ca, err := security.NewCA(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// issuePair issues a certificate of ca and returns it with its key.
func issuePair(t testing.TB, ca *security.CA, req security.Request) tls.Certificate {
	t.Helper()
	c, k := issuePEM(t, ca, req)
	pair, err := security.KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// issuePEM issues a certificate of ca and returns its chain and key in PEM.
func issuePEM(t testing.TB, ca *security.CA, req security.Request) (certPEM, keyPEM []byte) {
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
	return security.CertPEM(chain...), kp
}

// secureCluster is n replicas with TLS everywhere; replica id's
// certificates come from cas[id-1].
type secureCluster struct {
	t      testing.TB
	cas    []*security.CA
	tokens *tlsdir.TokenFile
	ms     []*Manager
}

type secureOpts struct {
	cas            []*security.CA // one per replica; nil: one CA for all
	n              int
	workerLifetime time.Duration
	noWait         bool
	minHeartbeat   time.Duration // Options.MinHeartbeat
}

func startSecure(t *testing.T, o secureOpts) *secureCluster {
	t.Helper()
	return startSecureTB(t, o, t.TempDir())
}

// startSecureTB is startSecure with the replicas' data under root.
func startSecureTB(t testing.TB, o secureOpts, root string) *secureCluster {
	t.Helper()
	if o.cas == nil {
		ca := newTestCA(t)
		for range o.n {
			o.cas = append(o.cas, ca)
		}
	}
	c := &secureCluster{t: t, cas: o.cas, tokens: newTokens(t), ms: make([]*Manager, o.n)}
	peers := map[uint64]string{}
	for id := uint64(1); id <= uint64(o.n); id++ {
		peers[id] = freeAddr(t)
	}
	t.Cleanup(func() {
		for _, m := range c.ms {
			if m != nil {
				m.Close()
			}
		}
	})
	for id := uint64(1); id <= uint64(o.n); id++ {
		ca := o.cas[id-1]
		dataDir := filepath.Join(root, fmt.Sprint(id))
		dir := tlsdir.Dir(filepath.Join(dataDir, "tls"))
		files, err := ca.Files()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, kp := issuePEM(t, ca, security.Request{Role: security.RoleManager, Name: fmt.Sprint(id), Hosts: []string{"127.0.0.1"}})
		cert, err := security.KeyPair(certPEM, kp)
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.WriteCA(files); err != nil {
			t.Fatal(err)
		}
		if err := dir.WritePair(tlsdir.Node, certPEM, kp); err != nil {
			t.Fatal(err)
		}
		m, err := Start(Options{DataDir: dataDir, ReplicaID: id, RaftAddr: peers[id], Peers: peers, Groups: 2,
			RaftLogLevel: "critical", APIAddr: "127.0.0.1:0", FailoverGrace: time.Second, MinHeartbeat: o.minHeartbeat,
			Engine: engine.Config{RTT: 20 * time.Millisecond, HeartbeatRTT: 3, ElectionRTT: 40},
			TLS: &TLS{CA: ca, Cert: cert, Tokens: c.tokens, WorkerLifetime: o.workerLifetime,
				RaftCAFile: dir.Path(tlsdir.ManagersCert), RaftCertFile: dir.Path(tlsdir.Node + ".crt"),
				RaftKeyFile: dir.Path(tlsdir.Node + ".key")}})
		if err != nil {
			t.Fatalf("start replica %d: %v", id, err)
		}
		c.ms[id-1] = m
	}
	if !o.noWait {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, m := range c.ms {
			if err := m.Register(ctx); err != nil {
				t.Fatalf("register: %v", err)
			}
		}
	}
	return c
}

func (c *secureCluster) addr(id uint64) string { return c.ms[id-1].APIAddr }

// token returns the current token of role.
func (c *secureCluster) token(role security.Role) string {
	s, _ := c.tokens.Secrets().For(role)
	return security.Token{Digest: c.cas[0].Digest(), Secret: s}.String()
}

// admin returns a user API client of replica id with an admin certificate.
func (c *secureCluster) admin(id uint64) *client.Client {
	cert := issuePair(c.t, c.cas[0], security.Request{Role: security.RoleAdmin, Name: "admin"})
	cl, err := client.NewTLS(c.addr(id), client.NewCredentials(c.cas[0].Root, &cert).TLS())
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// joinWorker joins a node with the worker token and returns its node ID
// and an agent client presenting its certificate.
func (c *secureCluster) joinWorker(ctx context.Context, id uint64, host string) (uint64, *client.AgentClient, *client.Credentials) {
	c.t.Helper()
	j, err := client.Join(ctx, []string{c.addr(id)}, c.token(security.RoleWorker),
		client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: host, CPU: 64000, Memory: 1 << 40}})
	if err != nil {
		c.t.Fatalf("join %s: %v", host, err)
	}
	kp, _ := security.KeyPEM(j.Key)
	pair, err := security.KeyPair([]byte(j.Answer.Cert), kp)
	if err != nil {
		c.t.Fatal(err)
	}
	creds := client.NewCredentials(c.cas[0].Root, &pair)
	ac, err := client.NewAgentClient([]string{c.addr(id)}, client.SharedHTTPS(16, creds.TLS(), pair.Leaf.NotAfter.Sub(pair.Leaf.NotBefore)))
	if err != nil {
		c.t.Fatal(err)
	}
	return j.Answer.NodeID, ac, creds
}

// metric returns the value of the first /metrics line starting with name.
func (c *secureCluster) metric(id uint64, name string) string {
	c.t.Helper()
	cert := issuePair(c.t, c.cas[0], security.Request{Role: security.RoleAdmin, Name: "admin"})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: client.NewCredentials(c.cas[0].Root, &cert).TLS()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + c.addr(id) + "/metrics")
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
