package security

import (
	"crypto/rand"
	"crypto/tls"
	"net"
	"testing"
)

// pair issues a certificate of role with its key, as crypto/tls takes it.
func pair(t testing.TB, ca *CA, role Role, name string) *tls.Certificate {
	t.Helper()
	k, err := NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ders, err := ca.Issue(rand.Reader, Request{Role: role, Name: name, Key: &k.PublicKey}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: ders, PrivateKey: k}
}

// connect runs one TLS connection from client to server over a pipe and
// reports whether it resumed a session. The client reads a byte the server
// writes, so it takes the tickets the server sends after the handshake.
func connect(t *testing.T, client, server *tls.Config) bool {
	t.Helper()
	// A loopback socket, not net.Pipe: both sides write at once during a
	// TLS 1.3 handshake, which an unbuffered pipe deadlocks on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		b, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		s := tls.Server(b, server)
		defer s.Close()
		if err := s.Handshake(); err != nil {
			srvErr <- err
			return
		}
		_, err = s.Write([]byte{1})
		srvErr <- err
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(a, client)
	defer c.Close()
	if err := c.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatalf("client read: %v", err)
	}
	if err := <-srvErr; err != nil {
		t.Fatalf("server: %v", err)
	}
	return c.ConnectionState().DidResume
}

// Managers of one cluster resume each other's sessions: an agent whose
// leader died reconnects to the next one without a full handshake. A
// manager that keeps its own ticket keys (the default) does not.
func TestManagersShareSessionTickets(t *testing.T) {
	ca := newCA(t)
	server := func(name string, share bool) *tls.Config {
		cert := pair(t, ca, RoleManager, name)
		cfg := ServerTLS(func() *tls.Certificate { return cert }, ca.RootPool())
		if share {
			if err := ShareTickets(cfg, ca); err != nil {
				t.Fatal(err)
			}
		}
		return cfg
	}
	m1, m2, own := server("1", true), server("2", true), server("3", false)
	worker := pair(t, ca, RoleWorker, "7")
	client := ClientTLS(ca.RootPool(), func() *tls.Certificate { return worker })

	if connect(t, client, m1) {
		t.Fatal("the first connection resumed a session it never had")
	}
	if !connect(t, client, m2) {
		t.Error("a session begun with manager 1 did not resume at manager 2 of the same cluster")
	}
	if connect(t, client, own) {
		t.Error("a manager with its own ticket keys resumed another manager's session")
	}
	if err := ShareTickets(&tls.Config{}, &CA{}); err == nil {
		t.Error("sharing tickets without the root key: no error")
	}
}
