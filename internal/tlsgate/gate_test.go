package tlsgate_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/tlsgate"
	"shoal/security"
)

// pair returns a server config presenting a manager certificate of a new
// CA and a client config trusting that CA.
func pair(t testing.TB) (srv, cli *tls.Config) {
	t.Helper()
	ca, err := security.NewCA(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := security.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ca.Issue(rand.Reader, security.Request{Role: security.RoleManager, Name: "1", Key: &key.PublicKey}, time.Now())
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
	srv = security.ServerTLS(func() *tls.Certificate { return &cert }, ca.RootPool())
	return srv, security.ClientTLS(ca.RootPool(), nil)
}

// serverConn accepts one connection from ln, dialled by a client that
// handshakes in the background.
func serverConn(t *testing.T, ln net.Listener, cli *tls.Config) *tlsgate.Conn {
	t.Helper()
	go func() {
		c, err := tls.Dial("tcp", ln.Addr().String(), cli)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*tlsgate.Conn)
}

// With one slot, a second handshake waits while the first is in progress:
// it never starts (the server's certificate is never asked for it) and
// fails when its wait is over; the first completes.
func TestOneHandshakeAtATime(t *testing.T) {
	srv, cli := pair(t)
	var asked atomic.Int32
	entered, hold := make(chan struct{}), make(chan struct{})
	getCert := srv.GetCertificate
	srv.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if asked.Add(1) == 1 {
			close(entered)
			<-hold // the first handshake keeps its slot until released
		}
		return getCert(h)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tlsgate.NewListener(inner, srv, 1, 300*time.Millisecond)
	defer ln.Close()

	first := serverConn(t, ln, cli)
	done := make(chan error, 1)
	go func() { done <- first.Handshake() }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the first handshake ended before asking for a certificate: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first handshake never asked for a certificate")
	}

	second := serverConn(t, ln, cli)
	if err := second.Handshake(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second handshake while the only slot is taken: %v, want a deadline error", err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d handshakes started with one slot", n)
	}
	close(hold)
	if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first handshake: %v", err)
	}
}

// BenchmarkHandshake measures one full TLS 1.3 handshake through the gate
// on loopback (both ends in this process): what a manager pays per
// connecting agent, client side included.
func BenchmarkHandshake(b *testing.B) {
	srv, cli := pair(b)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ln := tlsgate.NewListener(inner, srv, 64, 10*time.Second)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tlsgate.Conn).Handshake(); c.Close() }()
		}
	}()
	for b.Loop() {
		c, err := tls.Dial("tcp", ln.Addr().String(), cli)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
