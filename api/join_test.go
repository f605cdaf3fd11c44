package api

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/engine/duty"
	"shoal/internal/clock"
	"shoal/manager/control"
	"shoal/security"
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

// A worker's join asked again with the same key and hostname (its answer
// was lost) gets the node of the first, also from another manager: one
// node per joiner, however often and whomever it asks. Another key, or the
// same key under another hostname, is another node. Two managers' APIs
// over TLS share the groups in memory.
func TestWorkerJoinAskedAgainIsOneNode(t *testing.T) {
	ctx := testCtx(t)
	ca, err := security.NewCA(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w, err1 := security.NewSecret(rand.Reader)
	mgr, err2 := security.NewSecret(rand.Reader)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	tokens := &memTokens{s: security.Secrets{Worker: w, Manager: mgr}}
	m := duty.NewMemory(2, clock.Real{})
	r := &memReplica{replica: &replica{leader: 1}, m: m, sub: duty.NewSubmitter(m, nil)}
	var addrs []string
	for i := range 2 {
		key, err := security.NewKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		chain, err := ca.Issue(rand.Reader, security.Request{Role: security.RoleManager, Name: string(rune('1' + i)),
			Hosts: []string{"127.0.0.1"}, Key: &key.PublicKey}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		kp, err := security.KeyPEM(key)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := security.KeyPair(security.CertPEM(chain...), kp)
		if err != nil {
			t.Fatal(err)
		}
		feed := control.NewFeed(m.Groups(), nil, 1024, 16)
		s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
			Feed: feed, Monitor: beats{ttl: time.Second}, Security: &Security{CA: ca, Tokens: tokens}})
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
		addrs = append(addrs, ln.Addr().String())
	}
	worker := security.Token{Digest: ca.Digest(), Secret: w}.String()
	join := func(m int, host string, key *ecdsa.PrivateKey) uint64 {
		t.Helper()
		j, err := client.JoinKeyed(ctx, []string{addrs[m]}, worker, client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: host}}, key)
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
	if n := len(m.State(0).NodeIDs()); n != 3 {
		t.Fatalf("%d nodes after five joins by three joiners, want 3", n)
	}
}
