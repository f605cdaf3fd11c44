package api

import (
	"crypto/rand"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/security"
)

// peerServer serves mutual TLS on a free loopback port, through
// LimitHandshakes (as a manager does) when admitted, else through a plain
// TLS listener, and runs handle on the first request. It returns a client
// configuration of a worker (node 7) and the cluster's ID.
func peerServer(tb testing.TB, admitted bool, handle func(ctx *fasthttp.RequestCtx)) (addr string, client *tls.Config, cluster string) {
	tb.Helper()
	now := time.Now()
	ca, err := security.NewCA(rand.Reader, now.Add(-time.Minute))
	if err != nil {
		tb.Fatal(err)
	}
	issue := func(role security.Role, name string) *tls.Certificate {
		k, err := security.NewKey(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		ders, err := ca.Issue(rand.Reader, security.Request{Role: role, Name: name, Key: &k.PublicKey, Hosts: []string{"127.0.0.1"}}, now.Add(-time.Minute))
		if err != nil {
			tb.Fatal(err)
		}
		return &tls.Certificate{Certificate: ders, PrivateKey: k}
	}
	srvCert, worker := issue(security.RoleManager, "1"), issue(security.RoleWorker, "7")
	cfg := security.ServerTLS(func() *tls.Certificate { return srvCert }, ca.RootPool())
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var ln net.Listener = tls.NewListener(raw, cfg)
	if admitted {
		ln = LimitHandshakes(raw, cfg, 4, 10*time.Second, nil)
	}
	srv := &fasthttp.Server{Handler: handle}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return raw.Addr().String(), security.ClientTLS(ca.RootPool(), func() *tls.Certificate { return worker }), ca.ClusterID
}

// get makes one request of the server at addr.
func get(tb testing.TB, addr string, cfg *tls.Config) {
	tb.Helper()
	hc := &fasthttp.Client{TLSConfig: cfg}
	if code, _, err := hc.Get(nil, "https://"+addr+"/"); err != nil || code != fasthttp.StatusOK {
		tb.Fatalf("request: status %d, %v", code, err)
	}
}

// A connection keeps its client's identity: every request on it reads the
// worker the certificate names.
func TestPeerIdentityOfEveryRequest(t *testing.T) {
	for _, admitted := range []bool{true, false} {
		var cluster string
		seen := 0
		addr, client, c := peerServer(t, admitted, func(ctx *fasthttp.RequestCtx) {
			id, hasLeaf, err := peerIdentity(ctx, cluster)
			if !hasLeaf || err != nil || id.Role != security.RoleWorker || id.NodeID() != 7 {
				t.Errorf("admitted %v: identity %+v, certificate %v, %v", admitted, id, hasLeaf, err)
			}
			if _, _, err := peerIdentity(ctx, "another-cluster"); err == nil {
				t.Errorf("admitted %v: a certificate of cluster %s passed for another", admitted, cluster)
			}
			seen++
		})
		cluster = c
		hc := &fasthttp.Client{TLSConfig: client, MaxConnsPerHost: 1}
		for range 3 {
			if code, _, err := hc.Get(nil, "https://"+addr+"/"); err != nil || code != fasthttp.StatusOK {
				t.Fatalf("request: status %d, %v", code, err)
			}
		}
		if seen != 3 {
			t.Fatalf("admitted %v: %d requests seen, want 3", admitted, seen)
		}
	}
}

// BenchmarkPeerIdentity is the client certificate's identity as a request
// to a manager reads it: kept by the connection (a manager's, through
// LimitHandshakes) or read from the TLS state at each request (a plain TLS
// listener; what every request did before).
func BenchmarkPeerIdentity(b *testing.B) {
	for _, admitted := range []bool{true, false} {
		name := "read"
		if admitted {
			name = "kept"
		}
		b.Run(name, func(b *testing.B) {
			var cluster string
			addr, client, c := peerServer(b, admitted, func(ctx *fasthttp.RequestCtx) {
				for b.Loop() {
					if _, ok, err := peerIdentity(ctx, cluster); !ok || err != nil {
						b.Errorf("no identity: %v", err) // not Fatal: this is the server's goroutine
						return
					}
				}
			})
			cluster = c
			get(b, addr, client)
		})
	}
}
