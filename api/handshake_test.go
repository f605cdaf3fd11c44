package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// selfSigned returns a throwaway server certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveEcho accepts connections on ln and echoes one byte on each.
func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b := make([]byte, 1)
			if _, err := c.Read(b); err == nil {
				_, _ = c.Write(b)
			}
		}()
	}
}

// limited listens on a free loopback port and serves the echo over TLS
// with cfg, concurrent handshakes at a time, each within timeout.
func limited(t *testing.T, cfg *tls.Config, concurrent int, timeout time.Duration) net.Listener {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitHandshakes(raw, cfg, concurrent, timeout, nil)
	t.Cleanup(func() { ln.Close() })
	go serveEcho(ln)
	return ln
}

// Property: with room for one handshake, a second client's handshake does
// not start while the first is under way, and starts once it ended.
func TestHandshakesAreAdmittedAFewAtATime(t *testing.T) {
	var entered atomic.Int32
	first, release := make(chan struct{}), make(chan struct{})
	cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if entered.Add(1) == 1 {
				close(first)
				<-release // the first handshake holds its turn
			}
			return nil, nil
		}}
	raw := limited(t, cfg, 1, 10*time.Second)

	dial := func(timeout time.Duration) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout, Deadline: time.Now().Add(timeout)}, "tcp",
			raw.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte{7}); err != nil {
			return err
		}
		_, err = c.Read(make([]byte, 1))
		return err
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- dial(10 * time.Second) }()
	<-first

	if err := dial(300 * time.Millisecond); err == nil {
		t.Fatal("a second handshake completed while the only turn was taken")
	}
	if n := entered.Load(); n != 1 {
		t.Fatalf("%d handshakes read their client's hello while one turn was taken, want 1", n)
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatalf("first connection: %v", err)
	}
	if err := dial(10 * time.Second); err != nil {
		t.Fatalf("a handshake after the first ended: %v", err)
	}
}

// A connection closed while it waits for a turn stops waiting at once.
func TestCloseEndsTheWaitForATurn(t *testing.T) {
	first, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var entered atomic.Int32
	cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if entered.Add(1) == 1 {
				close(first)
				<-release // the first handshake holds the only turn
			}
			return nil, nil
		}}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitHandshakes(raw, cfg, 1, 10*time.Second, nil)
	defer ln.Close()
	go func() {
		if c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true}); err == nil {
			c.Close()
		}
	}()
	c1, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	go func() { _ = c1.(*admittedConn).Handshake() }()
	<-first
	for _, closeFirst := range []bool{false, true} {
		d, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		c2, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if closeFirst {
			c2.Close()
		}
		ac := c2.(*admittedConn)
		done := make(chan error, 1)
		go func() { done <- ac.Handshake() }()
		if !closeFirst { // close it once it waits
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				ac.mu.Lock()
				waiting := ac.closed != nil
				ac.mu.Unlock()
				if waiting {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the second connection did not wait for a turn")
				}
			}
		}
		c2.Close()
		select {
		case err := <-done:
			if !errors.Is(err, errClosedWaiting) {
				t.Errorf("closed before its wait %v: %v, want %v", closeFirst, err, errClosedWaiting)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("closed before its wait %v: still waiting for a turn 5 s after its connection was closed", closeFirst)
		}
	}
}

// A client that connects and says nothing holds its turn for the
// handshake timeout only: then the next client's handshake runs.
func TestSilentClientGivesUpItsTurn(t *testing.T) {
	cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	raw := limited(t, cfg, 1, 200*time.Millisecond)
	silent, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// The silent connection is closed by the server once its time is up.
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent client read something")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a silent client's connection for 10 s")
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("handshake after the silent client's turn: %v", err)
	}
	c.Close()
}

// A connection closed after its handshake without a byte of request is
// reported unused (a client that gave up on its call); one that carried a
// request is not.
func TestUnusedConnectionsAreCounted(t *testing.T) {
	cert := selfSigned(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var unused, done atomic.Int64
	ln := LimitHandshakes(raw, &tls.Config{Certificates: []tls.Certificate{cert}}, 4, 0, func(h Handshake) {
		if h.Unused {
			unused.Add(1)
		} else {
			done.Add(1)
		}
	})
	defer ln.Close()
	go serveEcho(ln)
	dial := func(send bool) {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b := []byte{7}
		if !send {
			// Read the server's close: its handshake is done, it waits
			// for a byte that never comes; closing makes it give up.
			_ = c.CloseWrite()
		} else if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		_, _ = c.Read(b)
	}
	dial(true)
	dial(false)
	deadline := time.Now().Add(20 * time.Second)
	for (unused.Load() < 1 || done.Load() < 2) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if unused.Load() != 1 || done.Load() != 2 {
		t.Fatalf("%d handshakes and %d unused connections observed, want 2 and 1", done.Load(), unused.Load())
	}
}

// A handshake whose client's hello came in time may run past the timeout
// (up to HelloGrace times it more): a starved server's handshakes were
// cut at the single bound after most of their work was done.
func TestHandshakeAfterItsHelloOutlivesTheTimeout(t *testing.T) {
	cert := selfSigned(t)
	const timeout = time.Second
	cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		time.Sleep(timeout + 300*time.Millisecond) // the server's share of the work, slow
		return &cert, nil
	}}
	raw := limited(t, cfg, 1, timeout)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("a handshake slower than the timeout after its hello: %v", err)
	}
	c.Close()
}

// firstWriteOnly sends its first write (a TLS client's hello) and then
// nothing: later writes are dropped, or close the connection (hangUp).
type firstWriteOnly struct {
	net.Conn
	wrote  bool
	hangUp bool
}

func (c *firstWriteOnly) Write(b []byte) (int, error) {
	if !c.wrote {
		c.wrote = true
		return c.Conn.Write(b)
	}
	if c.hangUp {
		_ = c.Conn.Close()
	}
	return len(b), nil
}

// A failed handshake is told apart by why it failed: a client that never
// sent its hello, one that sent it and then stalled, one that hung up.
func TestFailedHandshakesTellWhy(t *testing.T) {
	cert := selfSigned(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan HandshakeFailure, 8)
	ln := LimitHandshakes(raw, &tls.Config{Certificates: []tls.Certificate{cert}}, 4, 300*time.Millisecond, func(h Handshake) {
		if h.Err != nil {
			failed <- failureOf(h.Err, h.Hello)
		}
	})
	defer ln.Close()
	go serveEcho(ln)
	next := func() HandshakeFailure {
		select {
		case f := <-failed:
			return f
		case <-time.After(20 * time.Second):
			t.Fatal("no failed handshake observed")
			return 0
		}
	}
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if f := next(); f != FailedNoHello {
		t.Errorf("a silent client: %v, want %v", f, FailedNoHello)
	}
	for _, hangUp := range []bool{false, true} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(&firstWriteOnly{Conn: c, hangUp: hangUp}, &tls.Config{InsecureSkipVerify: true})
		_ = tc.Handshake() // its Finished never reaches the server
		want := FailedSlow
		if hangUp {
			want = FailedClosed
		}
		if f := next(); f != want {
			t.Errorf("a client that sent its hello (hang up %v): %v, want %v", hangUp, f, want)
		}
		c.Close()
	}
}
