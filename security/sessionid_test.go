package security

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// keeperConn is a server connection that keeps a resumed session's
// identity, as the manager's listener does.
type keeperConn struct {
	net.Conn
	told bool
	id   *SessionIdentity
}

func (k *keeperConn) KeepSessionIdentity(id *SessionIdentity) { k.told, k.id = true, id }

// session is what the server saw of one connection.
type session struct {
	state tls.ConnectionState
	told  bool             // the connection was told of a ticket taken
	id    *SessionIdentity // and that ticket's identity
}

// connectKept runs one connection as connect does, the server's side over
// a keeperConn when keep is set, and returns what the server saw.
func connectKept(t *testing.T, client, server *tls.Config, keep bool) (session, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		s   session
		err error
	}
	srv := make(chan result, 1)
	go func() {
		b, err := ln.Accept()
		if err != nil {
			srv <- result{err: err}
			return
		}
		k := &keeperConn{Conn: b}
		var under net.Conn = b
		if keep {
			under = k
		}
		s := tls.Server(under, server)
		defer s.Close()
		if err := s.Handshake(); err != nil {
			srv <- result{err: err}
			return
		}
		_, err = s.Write([]byte{1})
		srv <- result{s: session{state: s.ConnectionState(), told: k.told, id: k.id}, err: err}
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(a, client)
	defer c.Close()
	cerr := c.Handshake()
	if cerr == nil {
		_, cerr = c.Read(make([]byte, 1))
	}
	r := <-srv
	if r.err == nil {
		r.err = cerr
	}
	return r.s, r.err
}

func identityServer(t *testing.T, ca *CA) *tls.Config {
	t.Helper()
	cert := pair(t, ca, RoleManager, "1")
	cfg := ServerTLS(func() *tls.Certificate { return cert }, ca.RootPool())
	if err := ShareTickets(cfg, ca); err != nil {
		t.Fatal(err)
	}
	if err := IdentityTickets(cfg, ca, time.Now); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A resumed session carries the identity its client's certificate named,
// not the certificate: the server's connection has no peer certificates,
// and is told the identity, the one Identify reads from the certificate.
// The ticket is a fraction of one that carries the chain, and the tickets
// a resumed connection issues carry the identity on.
func TestResumedSessionCarriesTheIdentity(t *testing.T) {
	ca := newCA(t)
	srv := identityServer(t, ca)
	var lens []int
	wrap := srv.WrapSession
	srv.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		b, err := wrap(cs, ss)
		lens = append(lens, len(b))
		return b, err
	}
	worker := pair(t, ca, RoleWorker, "7")
	want, err := Identify(parseLeaf(t, worker), ca.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	client := ClientTLS(ca.RootPool(), func() *tls.Certificate { return worker })

	first, err := connectKept(t, client, srv, true)
	if err != nil {
		t.Fatal(err)
	}
	if first.state.DidResume || len(first.state.PeerCertificates) != 1 || first.told {
		t.Fatalf("first connection: resumed %v, %d peer certificates, told %v", first.state.DidResume, len(first.state.PeerCertificates), first.told)
	}
	if len(lens) != 1 || lens[0] > 300 {
		t.Errorf("tickets issued %v, want one of at most 300 bytes (one with the chain is about 1,100)", lens)
	}
	for i := range 2 { // the second resumes the first's ticket, the third the second's
		s, err := connectKept(t, client, srv, true)
		if err != nil {
			t.Fatal(err)
		}
		if !s.state.DidResume || len(s.state.PeerCertificates) != 0 || len(s.state.VerifiedChains) != 0 {
			t.Fatalf("connection %d: resumed %v with %d peer certificates", i+2, s.state.DidResume, len(s.state.PeerCertificates))
		}
		if s.id == nil || s.id.Cluster != ca.ClusterID || s.id.Role != want.Role || s.id.Name != want.Name || !s.id.NotAfter.Equal(want.NotAfter) {
			t.Fatalf("connection %d: identity %+v, want %+v of cluster %s", i+2, s.id, want, ca.ClusterID)
		}
	}

	// Over a connection that keeps no identity, such a ticket is not
	// taken: a full handshake verifies the certificate.
	plain, err := connectKept(t, client, srv, false)
	if err != nil {
		t.Fatal(err)
	}
	if plain.state.DidResume || len(plain.state.PeerCertificates) != 1 {
		t.Errorf("a connection that keeps no identity resumed (%v) with %d certificates", plain.state.DidResume, len(plain.state.PeerCertificates))
	}

	// A manager that does not read identities (one that only shares the
	// cluster's ticket key, as before) takes none of these tickets: to
	// crypto/tls alone it would be a session without a certificate.
	shared := ServerTLS(func() *tls.Certificate { return pair(t, ca, RoleManager, "2") }, ca.RootPool())
	if err := ShareTickets(shared, ca); err != nil {
		t.Fatal(err)
	}
	old, err := connectKept(t, client, shared, false)
	if err != nil {
		t.Fatal(err)
	}
	if old.state.DidResume || len(old.state.PeerCertificates) != 1 {
		t.Errorf("a manager without identity tickets resumed (%v) with %d certificates", old.state.DidResume, len(old.state.PeerCertificates))
	}
	// And its tickets (carrying the chain) still resume here.
	if s, err := connectKept(t, client, srv, true); err != nil || !s.state.DidResume || len(s.state.PeerCertificates) != 1 || !s.told || s.id != nil {
		t.Errorf("a ticket carrying the chain: resumed %v with %d certificates, told %v, identity %+v, %v", s.state.DidResume, len(s.state.PeerCertificates), s.told, s.id, err)
	}

	// A client without a certificate keeps crypto/tls's tickets, and a
	// connection that resumes one is told there is no identity.
	anon := ClientTLS(ca.RootPool(), nil)
	if _, err := connectKept(t, anon, srv, true); err != nil {
		t.Fatal(err)
	}
	s, err := connectKept(t, anon, srv, true)
	if err != nil || !s.state.DidResume || !s.told || s.id != nil {
		t.Errorf("a session without a certificate: resumed %v, told %v, identity %+v, %v", s.state.DidResume, s.told, s.id, err)
	}

	// Another cluster's manager takes none of these tickets.
	if s, err := connectKept(t, client, identityServer(t, newCA(t)), true); err == nil || s.state.DidResume {
		t.Errorf("another cluster's manager: resumed %v, %v", s.state.DidResume, err)
	}
}

// A ticket's identity is taken only while the chain it was issued for
// would be: at a time past the certificate's expiry the session does not
// resume, and the client's full handshake fails on its expired
// certificate, as when the ticket carried the chain.
func TestExpiredIdentityDoesNotResume(t *testing.T) {
	ca := newCA(t)
	k, err := NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// A lifetime within a ticket's (7 days: crypto/tls takes none older).
	ders, err := ca.Issue(rand.Reader, Request{Role: RoleWorker, Name: "7", Key: &k.PublicKey, Lifetime: 2 * time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	worker := &tls.Certificate{Certificate: ders, PrivateKey: k}
	leaf := parseLeaf(t, worker)
	client := ClientTLS(ca.RootPool(), func() *tls.Certificate { return worker })
	for _, tc := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"within", leaf.NotAfter.Add(-time.Minute), true},
		{"at the expiry", leaf.NotAfter, true},
		{"past the expiry", leaf.NotAfter.Add(time.Second), false},
		{"before the certificate", leaf.NotBefore.Add(-time.Second), false},
	} {
		var at time.Time // zero: now
		srv := identityServer(t, ca)
		srv.Time = func() time.Time {
			if at.IsZero() {
				return time.Now()
			}
			return at
		}
		client := client.Clone()
		client.ClientSessionCache = tls.NewLRUClientSessionCache(1)
		if s, err := connectKept(t, client, srv, true); err != nil || s.state.DidResume {
			t.Fatalf("%s: the first connection resumed (%v), %v", tc.name, s.state.DidResume, err)
		}
		at = tc.at
		s, err := connectKept(t, client, srv, true)
		if tc.ok {
			if err != nil || !s.state.DidResume || s.id == nil {
				t.Errorf("%s: resumed %v, identity %+v, %v", tc.name, s.state.DidResume, s.id, err)
			}
			continue
		}
		if err == nil || s.state.DidResume {
			t.Errorf("%s: resumed %v with identity %+v, %v; want a failed full handshake", tc.name, s.state.DidResume, s.id, err)
		}
		if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
			t.Errorf("%s: %v, want the certificate's verification to fail", tc.name, err)
		}
	}
}

// An entry read back is the identity written, and each of the checks
// refuses it on its own.
func TestIdentityEntryChecks(t *testing.T) {
	ca := newCA(t)
	tk := &identityTickets{cluster: ca.ClusterID, root: ca.Root}
	tk.rootSum[0] = 1
	id := &SessionIdentity{Identity: Identity{Role: RoleWorker, Name: "42", NotAfter: t0.Add(time.Hour)}, Cluster: ca.ClusterID,
		from: t0.Add(-time.Hour).Unix(), until: t0.Add(30 * time.Minute).Unix()}
	e := tk.entry(id)
	got, ok := tk.identityOf(e, t0)
	if !ok || got.Role != id.Role || got.Name != id.Name || !got.NotAfter.Equal(id.NotAfter) || got.Cluster != id.Cluster ||
		got.from != id.from || got.until != id.until {
		t.Fatalf("read back %+v, %v; want %+v", got, ok, id)
	}
	for name, now := range map[string]time.Time{
		"before the chain's NotBefore": t0.Add(-time.Hour - time.Second),
		"past the chain's NotAfter":    t0.Add(30*time.Minute + time.Second),
	} {
		if _, ok := tk.identityOf(e, now); ok {
			t.Errorf("%s: taken", name)
		}
	}
	late := *id
	late.until = t0.Add(2 * time.Hour).Unix()
	if _, ok := tk.identityOf(tk.entry(&late), t0.Add(time.Hour+time.Second)); ok {
		t.Error("past the leaf's NotAfter: taken")
	}
	other := &identityTickets{cluster: tk.cluster, root: tk.root}
	other.rootSum[0] = 2
	if _, ok := other.identityOf(e, t0); ok {
		t.Error("another root's entry: taken")
	}
	for n := len(sessionIDTag); n < len(e); n++ {
		if _, ok := tk.identityOf(e[:n], t0); ok {
			t.Fatalf("an entry cut at %d bytes: taken", n)
		}
	}
}

func parseLeaf(t *testing.T, c *tls.Certificate) *x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// Handshakes that resume at once, each of another worker, each give their
// own connection their own identity (the copies of the configuration a
// resuming handshake runs with serve one handshake after another).
func TestConcurrentResumptionsKeepTheirOwnIdentity(t *testing.T) {
	ca := newCA(t)
	srv := identityServer(t, ca)
	const workers, rounds = 16, 4
	clients := make([]*tls.Config, workers)
	for i := range clients {
		w := pair(t, ca, RoleWorker, strconv.Itoa(i+1))
		clients[i] = ClientTLS(ca.RootPool(), func() *tls.Certificate { return w })
		if _, err := connectKept(t, clients[i], srv, true); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for i, c := range clients {
		wg.Go(func() {
			for range rounds {
				s, err := connectKept(t, c, srv, true)
				switch {
				case err != nil:
					errs <- err
				case !s.state.DidResume || s.id == nil:
					errs <- fmt.Errorf("worker %d: resumed %v, identity %+v", i+1, s.state.DidResume, s.id)
				case s.id.Name != strconv.Itoa(i+1):
					errs <- fmt.Errorf("worker %d's connection was given worker %s's identity", i+1, s.id.Name)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
