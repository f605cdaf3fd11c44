package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/security"
	"shoal/wire"
)

// tlsManager is a TLS server answering heartbeats, with a mutual-TLS
// configuration as a manager's (its own CA, ticket key shared) and the
// client configuration of a worker of that cluster. Each handshake's
// connection state goes to states; a handshake waits for gate (if set)
// before the server answers the client's hello.
type tlsManager struct {
	addr   string
	client *tls.Config
	gate   chan struct{}

	mu     sync.Mutex
	states []tls.ConnectionState
}

func newTLSManager(t testing.TB, gated bool) *tlsManager {
	t.Helper()
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
	m := &tlsManager{}
	if gated {
		m.gate = make(chan struct{})
	}
	srvCert, worker := issue(security.RoleManager, "1"), issue(security.RoleWorker, "7")
	cfg := security.ServerTLS(func() *tls.Certificate { return srvCert }, ca.RootPool())
	if err := security.ShareTickets(cfg, ca); err != nil {
		t.Fatal(err)
	}
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if m.gate != nil {
			<-m.gate
		}
		return nil, nil
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		m.mu.Lock()
		m.states = append(m.states, cs)
		m.mu.Unlock()
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var m wire.Message = &wire.HeartbeatAck{}
		if bytes.HasSuffix(ctx.Path(), []byte("/assignments")) {
			m = &wire.Assignments{Kind: wire.FrameIncremental, Last: true}
		}
		b, err := wire.Append(nil, m)
		if err != nil {
			t.Error(err)
		}
		ctx.SetBody(b)
	}}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	m.addr = ln.Addr().String()
	m.client = NewCredentials(ca.Root, worker).TLS()
	return m
}

func (m *tlsManager) handshakes() []tls.ConnectionState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]tls.ConnectionState(nil), m.states...)
}

// A heartbeat whose TLS handshake outlasts its deadline fails at its
// deadline, and the handshake it gave up serves the next heartbeat: when
// a fleet moved to a new leader at once, the HTTP client waited for a
// handshake up to its 30 s write timeout, then failed the call anyway and
// closed the connection both sides had just paid for, and the retry paid
// for another.
func TestGivenUpHandshakeServesTheNextCall(t *testing.T) {
	m := newTLSManager(t, true)
	given, taken := Dials.GivenUp.Load(), Dials.TakenOver.Load()
	ac, err := NewAgentClient([]string{m.addr}, AgentHTTPS(m.client, 0))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1})
		first <- err
	}()
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	select {
	case err := <-first:
		if err == nil {
			t.Fatal("a heartbeat succeeded while its handshake was held")
		}
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("the first heartbeat failed with %v, want an unreachable manager", err)
		}
	case <-guard.C:
		t.Error("a heartbeat with a 100 ms deadline was still waiting for its handshake 20 s later")
	}
	close(m.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err != nil {
		t.Fatalf("the heartbeat after the handshake was let through: %v", err)
	}
	if n := len(m.handshakes()); n != 1 {
		t.Fatalf("the manager ran %d handshakes for the agent, want 1 (the second heartbeat takes over the first's)", n)
	}
	if g, k := Dials.GivenUp.Load()-given, Dials.TakenOver.Load()-taken; g != 1 || k != 1 {
		t.Errorf("the dialers counted %d set-ups given up and %d taken over, want 1 and 1", g, k)
	}
}

// A connection that resumes a session offers X25519 alone; a full
// handshake keeps the hybrid post-quantum exchange.
func TestResumingConnectionsOfferX25519Only(t *testing.T) {
	m := newTLSManager(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		// A client of its own each time (same TLS configuration and
		// session cache): a new connection, as after a leader change.
		ac, err := NewAgentClient([]string{m.addr}, AgentHTTPS(m.client, 0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Heartbeat(ctx, &wire.Heartbeat{NodeID: 1}); err != nil {
			t.Fatalf("heartbeat %d: %v", i+1, err)
		}
		// The server sends its ticket after the handshake; the client
		// takes it on its next read, which the answer is.
	}
	hs := m.handshakes()
	if len(hs) != 2 {
		t.Fatalf("%d handshakes, want 2", len(hs))
	}
	if hs[0].DidResume || hs[0].CurveID != tls.X25519MLKEM768 {
		t.Errorf("first connection: resumed %v, key exchange %v; want a full handshake with X25519MLKEM768", hs[0].DidResume, hs[0].CurveID)
	}
	if !hs[1].DidResume || hs[1].CurveID != tls.X25519 {
		t.Errorf("second connection: resumed %v, key exchange %v; want a resumption with X25519", hs[1].DidResume, hs[1].CurveID)
	}
}
