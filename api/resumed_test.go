package api

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/security"
)

// A connection that resumed a session from a ticket carrying its client's
// identity (security.IdentityTickets, as a manager serves) has no client
// certificate in its TLS state; each request on it reads the same
// identity, and the same refusal for another cluster, as on the
// connection whose full handshake verified the certificate.
func TestResumedConnectionKeepsItsIdentity(t *testing.T) {
	now := time.Now()
	ca, err := security.NewCA(rand.Reader, now.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(role security.Role, name string) *tls.Certificate {
		k, err := security.NewKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ders, err := ca.Issue(rand.Reader, security.Request{Role: role, Name: name, Key: &k.PublicKey, Hosts: []string{"127.0.0.1"}}, now.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Certificate{Certificate: ders, PrivateKey: k}
	}
	srvCert := issue(security.RoleManager, "1")
	cfg := security.ServerTLS(func() *tls.Certificate { return srvCert }, ca.RootPool())
	if err := security.ShareTickets(cfg, ca); err != nil {
		t.Fatal(err)
	}
	if err := security.IdentityTickets(cfg, ca, time.Now); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		resumed bool
		certs   int
		id      security.Identity
		hasLeaf bool
		err     error
		other   error // the identity asked for another cluster
	}
	var mu sync.Mutex
	var requests []seen
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		st := ctx.TLSConnectionState()
		id, hasLeaf, err := peerIdentity(ctx, ca.ClusterID)
		_, _, other := peerIdentity(ctx, "another-cluster")
		mu.Lock()
		requests = append(requests, seen{st.DidResume, len(st.PeerCertificates), *id, hasLeaf, err, other})
		mu.Unlock()
	}}
	go func() { _ = srv.Serve(LimitHandshakes(raw, cfg, 4, 10*time.Second, nil)) }()
	defer func() { _ = srv.Shutdown() }()

	for _, c := range []struct {
		role security.Role
		name string
	}{{security.RoleWorker, "7"}, {security.RoleAdmin, "admin"}, {security.RoleManager, "2"}} {
		requests = nil
		cert := issue(c.role, c.name)
		hc := &fasthttp.Client{TLSConfig: security.ClientTLS(ca.RootPool(), func() *tls.Certificate { return cert }), MaxConnsPerHost: 1}
		for range 3 { // a full handshake, then two resumed connections
			for range 2 { // two requests on each
				if code, _, err := hc.Get(nil, "https://"+raw.Addr().String()+"/"); err != nil || code != fasthttp.StatusOK {
					t.Fatalf("%s: status %d, %v", c.role, code, err)
				}
			}
			hc.CloseIdleConnections()
		}
		mu.Lock()
		got := requests
		mu.Unlock()
		if len(got) != 6 {
			t.Fatalf("%s: %d requests seen, want 6", c.role, len(got))
		}
		want := got[0]
		if want.resumed || want.certs == 0 || !want.hasLeaf || want.err != nil || want.id.Role != c.role || want.id.Name != c.name {
			t.Fatalf("%s: the first connection: %+v", c.role, want)
		}
		for i, r := range got[2:] {
			if !r.resumed || r.certs != 0 {
				t.Fatalf("%s: request %d: resumed %v with %d certificates, want a resumption without", c.role, i+3, r.resumed, r.certs)
			}
			if r.hasLeaf != want.hasLeaf || r.err != nil || r.id.Role != want.id.Role || r.id.Name != want.id.Name || !r.id.NotAfter.Equal(want.id.NotAfter) {
				t.Errorf("%s: request %d on a resumed connection: %+v, want %+v", c.role, i+3, r, want)
			}
			if !errors.Is(r.other, security.ErrNoIdentity) || !errors.Is(want.other, security.ErrNoIdentity) {
				t.Errorf("%s: request %d: another cluster's identity: %v (the full handshake's: %v)", c.role, i+3, r.other, want.other)
			}
		}
	}
}
