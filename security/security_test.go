package security

import (
	"crypto/rand"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"
)

// t0 is now: VerifyPinned checks validity against the wall clock, like TLS.
var t0 = time.Now().UTC().Truncate(time.Second)

func newCA(t testing.TB) *CA {
	t.Helper()
	ca, err := NewCA(rand.Reader, t0)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t *testing.T, ca *CA, req Request) []*x509.Certificate {
	t.Helper()
	k, err := NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCertRequest(rand.Reader, k)
	if err != nil {
		t.Fatal(err)
	}
	if req.Key, err = ParseCertRequest(csr); err != nil {
		t.Fatal(err)
	}
	ders, err := ca.Issue(rand.Reader, req, t0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*x509.Certificate
	for _, d := range ders {
		c, err := x509.ParseCertificate(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func verify(leaf *x509.Certificate, roots *x509.CertPool, chain []*x509.Certificate, usage x509.ExtKeyUsage) error {
	inter := x509.NewCertPool()
	for _, c := range chain {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: t0.Add(time.Hour),
		KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// The CA survives a round trip through its files, with the same digest.
func TestCAFilesRoundTrip(t *testing.T) {
	ca := newCA(t)
	f, err := ca.Files()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCA(f)
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest() != ca.Digest() || back.ClusterID != ca.ClusterID {
		t.Fatalf("round trip changed the CA: %s/%s vs %s/%s", back.Digest(), back.ClusterID, ca.Digest(), ca.ClusterID)
	}
	other := newCA(t)
	of, _ := other.Files()
	f.RootKey = of.RootKey
	if _, err := ParseCA(f); !errors.Is(err, ErrBadCA) {
		t.Fatalf("a root key of another CA was accepted: %v", err)
	}
}

// A worker certificate chains to the root but not to the managers CA (so
// Raft, which trusts only the managers CA, refuses it); a manager
// certificate chains to both and names ManagerName.
func TestIssueRoles(t *testing.T) {
	ca := newCA(t)
	w := issue(t, ca, Request{Role: RoleWorker, Name: "42", Lifetime: time.Hour})
	if err := verify(w[0], ca.RootPool(), nil, x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatalf("worker cert does not verify against the root: %v", err)
	}
	if err := verify(w[0], PoolOf(ca.Managers), nil, x509.ExtKeyUsageClientAuth); err == nil {
		t.Fatal("a worker certificate verifies against the managers CA: it could speak Raft")
	}
	id, err := Identify(w[0], ca.ClusterID)
	if err != nil || id.Role != RoleWorker || id.NodeID() != 42 {
		t.Fatalf("worker identity = %+v, %v", id, err)
	}
	if _, err := Identify(w[0], "another"); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("a certificate of another cluster ID was identified: %v", err)
	}
	m := issue(t, ca, Request{Role: RoleManager, Name: "2", Hosts: []string{"10.0.0.7", "mgr.example"}})
	if len(m) != 3 || m[2].Raw == nil || DigestOf(m[2].Raw) != ca.Digest() {
		t.Fatalf("manager chain should be leaf, managers CA, root; got %d certificates", len(m))
	}
	if err := verify(m[0], PoolOf(ca.Managers), nil, x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatalf("manager cert does not verify against the managers CA: %v", err)
	}
	if err := verify(m[0], ca.RootPool(), m[1:2], x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatalf("manager cert does not verify against the root: %v", err)
	}
	for _, name := range []string{ManagerName, "10.0.0.7", "mgr.example", "127.0.0.1"} {
		if err := m[0].VerifyHostname(name); err != nil {
			t.Errorf("manager cert does not cover %s: %v", name, err)
		}
	}
	if _, err := ca.Issue(rand.Reader, Request{Role: "root", Name: "x", Key: &ca.RootKey.PublicKey}, t0); !errors.Is(err, ErrBadCertRequest) {
		t.Fatalf("unknown role issued: %v", err)
	}
}

// A joiner accepts a manager only if the presented chain ends in the root
// its token pins.
func TestVerifyPinned(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	m := issue(t, ca, Request{Role: RoleManager, Name: "1"})
	raw := [][]byte{m[0].Raw, m[1].Raw, m[2].Raw}
	if _, err := VerifyPinned(raw, ca.Digest()); err != nil {
		t.Fatalf("right pin refused: %v", err)
	}
	if _, err := VerifyPinned(raw, other.Digest()); !errors.Is(err, ErrManagerNotPinned) {
		t.Fatalf("another cluster's pin accepted: %v", err)
	}
	w := issue(t, ca, Request{Role: RoleWorker, Name: "3"})
	if _, err := VerifyPinned([][]byte{w[0].Raw, ca.Root.Raw}, ca.Digest()); !errors.Is(err, ErrManagerNotPinned) {
		t.Fatalf("a worker certificate passed as a manager: %v", err)
	}
}

func TestTokens(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	var sec Secrets
	var err error
	if sec.Worker, err = NewSecret(rand.Reader); err != nil {
		t.Fatal(err)
	}
	sec.Manager, _ = NewSecret(rand.Reader)
	wt := Token{Digest: ca.Digest(), Secret: sec.Worker}
	s := wt.String()
	if !strings.HasPrefix(s, "SHOAL-1-"+ca.Digest().String()+"-") || len(s) != len("SHOAL-1-")+64+1+26 {
		t.Fatalf("token %q does not have the documented shape", s)
	}
	back, err := ParseToken(" " + s + "\n")
	if err != nil || back != wt {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{"", "SWMTKN-1-abc-def", "SHOAL-2-" + s[8:], s[:len(s)-1], s + "x",
		strings.Replace(s, "-", "_", 3), "SHOAL-1-" + strings.Repeat("z", 64) + "-" + sec.Worker.Text()} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrTokenFormat) {
			t.Errorf("ParseToken(%q) = %v, want ErrTokenFormat", bad, err)
		}
	}
	cases := []struct {
		name string
		tok  Token
		role Role
		want error
	}{
		{"worker ok", wt, RoleWorker, nil},
		{"manager ok", Token{ca.Digest(), sec.Manager}, RoleManager, nil},
		{"other cluster", Token{other.Digest(), sec.Worker}, RoleWorker, ErrTokenOtherCluster},
		{"rotated", Token{ca.Digest(), Secret{1, 2, 3}}, RoleWorker, ErrTokenRotated},
		{"worker token for a manager", wt, RoleManager, ErrTokenWrongRole},
	}
	for _, c := range cases {
		err := sec.Verify(c.tok, ca.Digest(), c.role)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), sec.Worker.Text()) || strings.Contains(err.Error(), sec.Manager.Text())) {
			t.Errorf("%s: the error repeats a secret", c.name)
		}
	}
	if err := sec.Verify(Token{ca.Digest(), sec.Manager}, ca.Digest(), RoleWorker); err == nil {
		t.Error("the manager token let a worker join")
	}
}

func TestFailLimiter(t *testing.T) {
	l := &FailLimiter{Burst: 3, Every: time.Second}
	now := t0
	for i := 0; i < 3; i++ {
		if w := l.Wait("a", now); w != 0 {
			t.Fatalf("attempt %d must be allowed, wait %s", i, w)
		}
		l.Fail("a", now)
	}
	if w := l.Wait("a", now); w != time.Second {
		t.Fatalf("after the burst wait = %s, want 1s", w)
	}
	if w := l.Wait("b", now); w != 0 {
		t.Fatalf("another source is limited too: %s", w)
	}
	if w := l.Wait("a", now.Add(time.Second)); w != 0 {
		t.Fatalf("one failure per second must refill: %s", w)
	}
	l = &FailLimiter{MaxSources: 4}
	for i := 0; i < 100; i++ {
		l.Fail(string(rune('a'+i)), now)
	}
	if len(l.sources) > 4 {
		t.Fatalf("limiter tracks %d sources, bound 4", len(l.sources))
	}
}

func TestRenewAt(t *testing.T) {
	c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(100 * time.Second)}
	if got := RenewAt(c, 0); got != t0.Add(50*time.Second) {
		t.Fatalf("u=0: %s", got.Sub(t0))
	}
	if got := RenewAt(c, 0.999999); got.Sub(t0) > 80*time.Second || got.Sub(t0) < 79*time.Second {
		t.Fatalf("u≈1: %s", got.Sub(t0))
	}
	if d := RenewBackoff(10, t0, t0.Add(8*time.Second)); d != 2*time.Second {
		t.Fatalf("backoff near expiry = %s, want a quarter of what is left", d)
	}
	if d := RenewBackoff(1, t0, t0.Add(time.Hour*24)); d != 5*time.Second {
		t.Fatalf("first backoff = %s", d)
	}
}
