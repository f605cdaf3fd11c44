package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shoal/security"
)

// TLS handshakes are admitted a bounded number at a time, each within a
// deadline. Before, a client that connected and never sent its hello held
// a goroutine and a descriptor until the server's read timeout (minutes),
// and when a leader died its whole fleet's handshakes (ten thousand)
// started together on the next one. The bound is set high: a handshake's
// wall time is mostly its client's round trips, so a small bound caps the
// rate (64 turns at 0.2 s each admitted 320 handshakes a second and kept
// a reconnecting fleet waiting 5 s for a turn). Each handshake is timed
// and counted (resumed or full) for the replica's metrics.

// DefaultHandshakes is how many TLS handshakes a replica runs at once by
// default: enough that clients a few round trips away do not wait for a
// turn when a fleet reconnects at once.
const DefaultHandshakes = 1024

// errHandshakeWait: a connection waited longer than the handshake timeout
// for its turn (a deadline passed: the server logs it as it does a timeout).
var errHandshakeWait = fmt.Errorf("TLS handshake not started in time, too many at once: %w", os.ErrDeadlineExceeded)

// errClosedWaiting: the connection was closed while it waited for its turn.
var errClosedWaiting = fmt.Errorf("TLS handshake not started: %w", net.ErrClosed)

// Handshake is what became of one handshake: how long it waited for its
// turn, how long it ran, whether it resumed a session, and its error.
// Unused reports instead a connection closed after its handshake without
// a byte of request read: set-up work its client threw away (a client
// that gave up on a call while the handshake ran, in a reconnect storm).
type Handshake struct {
	Wait, Took time.Duration
	Resumed    bool
	Err        error
	Unused     bool
	// Hello: the client's hello had come (a failed handshake that timed
	// out after it was slow, not silent).
	Hello bool
}

// HandshakeFailure is why a handshake failed, as the replica's metrics
// tell it: a failure after the hello is work both sides threw away.
type HandshakeFailure int

const (
	FailedTurn    HandshakeFailure = iota // waited for a turn past the timeout
	FailedNoHello                         // no client hello within the timeout
	FailedSlow                            // timed out after the hello
	FailedClosed                          // the client closed the connection
	FailedRefused                         // anything else: a bad certificate, a protocol error
	numHandshakeFailures
)

func (f HandshakeFailure) String() string {
	return [...]string{"turn", "no_hello", "slow", "closed", "refused"}[f]
}

// failureOf tells why a handshake failed with err (hello: the client's
// hello had come).
func failureOf(err error, hello bool) HandshakeFailure {
	var ne net.Error
	switch {
	case errors.Is(err, errHandshakeWait):
		return FailedTurn
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		if hello {
			return FailedSlow
		}
		return FailedNoHello
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return FailedClosed
	}
	return FailedRefused
}

// LimitHandshakes returns a listener serving TLS with cfg over ln that runs
// at most concurrent handshakes at once (0: DefaultHandshakes). Each
// connection's turn and its client's hello together take at most timeout
// (0: 10s): a client that connects and stays silent holds a turn no
// longer. Once the hello has come, the handshake may take HelloGrace
// times timeout more: a server starved by a fleet reconnecting at once
// ran handshakes for 7 s on average at 10,000 agents, and the single
// bound cut a quarter of them at 10 s, after most of their work (both
// sides') was done; their clients dialled again. The handshake runs on
// the connection's first read or write, in its server's goroutine, as
// with tls.NewListener. observe, if set, is told of every handshake.
// cfg is cloned: set it up (ticket keys included) before.
func LimitHandshakes(ln net.Listener, cfg *tls.Config, concurrent int, timeout time.Duration, observe func(Handshake)) net.Listener {
	if concurrent <= 0 {
		concurrent = DefaultHandshakes
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if observe == nil {
		observe = func(Handshake) {}
	}
	cfg = cfg.Clone()
	next := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		// hello.Conn is the connection under TLS; the handshake's own
		// deadline is set on it, and the server's are restored after.
		_ = hello.Conn.SetDeadline(time.Now().Add(HelloGrace * timeout))
		if h, ok := hello.Conn.(*helloConn); ok {
			h.hello.Store(true)
		}
		if next != nil {
			return next(hello)
		}
		return nil, nil
	}
	return &handshakeListener{Listener: ln, cfg: cfg, turns: make(chan struct{}, concurrent), timeout: timeout, observe: observe}
}

// HelloGrace is how many handshake timeouts a handshake may still take
// once its client's hello has come.
const HelloGrace = 2

type handshakeListener struct {
	net.Listener
	cfg     *tls.Config
	turns   chan struct{} // one token per handshake under way
	timeout time.Duration
	observe func(Handshake)
}

func (l *handshakeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	h := &helloConn{Conn: c}
	return &admittedConn{Conn: tls.Server(h, l.cfg), l: l, hc: h}, nil
}

// helloConn is the connection under a server TLS connection; it notes
// when the client's hello came, and keeps the identity of a session its
// client resumed from a ticket that carries one (security.IdentityTickets):
// such a connection has no client certificate in its TLS state.
type helloConn struct {
	net.Conn
	hello   atomic.Bool
	session atomic.Pointer[security.SessionIdentity]
}

// KeepSessionIdentity is told, during the handshake, the identity of the
// session the client resumes (nil: none).
func (h *helloConn) KeepSessionIdentity(id *security.SessionIdentity) { h.session.Store(id) }

// NetConn returns the connection below (TrackIdle finds the guarded one).
func (h *helloConn) NetConn() net.Conn { return h.Conn }

// admittedConn is a server TLS connection whose handshake waits for its
// turn. It keeps the deadlines its server sets while the handshake runs
// under its own, and restores them after (a deadline set meanwhile does
// not cut the handshake short: the server sets them from the goroutine
// that runs the handshake anyway).
type admittedConn struct {
	*tls.Conn
	l     *handshakeListener
	hc    *helloConn
	once  sync.Once
	err   error
	shut  sync.Once
	shook atomic.Bool // the handshake succeeded
	read  atomic.Bool // a byte after the handshake was read

	mu              sync.Mutex
	readDL, writeDL time.Time     // what the server asked for
	shaking         bool          // the handshake's own deadline is on
	isClosed        bool          // Close was called
	closed          chan struct{} // made when a wait for a turn begins; Close closes it

	peer    peerOnce     // the client certificate's identity (auth.go)
	removed removedCheck // whether its node was removed (auth.go)
}

func (c *admittedConn) Handshake() error {
	c.once.Do(func() { c.err = c.admitted() })
	return c.err
}

// HandshakeContext is Handshake: the turn and the deadline bound it, not
// ctx.
func (c *admittedConn) HandshakeContext(context.Context) error { return c.Handshake() }

// Close closes the connection, ending a wait for a turn.
func (c *admittedConn) Close() error {
	c.shut.Do(func() {
		c.mu.Lock()
		c.isClosed = true
		if c.closed != nil {
			close(c.closed)
		}
		c.mu.Unlock()
		if c.shook.Load() && !c.read.Load() {
			c.l.observe(Handshake{Unused: true})
		}
	})
	return c.Conn.Close()
}

func (c *admittedConn) admitted() (err error) {
	start := time.Now()
	end := start.Add(c.l.timeout)
	select {
	case c.l.turns <- struct{}{}:
	default: // wait for a turn (a channel and a timer for those that wait only)
		c.mu.Lock()
		if c.isClosed {
			c.mu.Unlock()
			return errClosedWaiting
		}
		c.closed = make(chan struct{})
		closed := c.closed
		c.mu.Unlock()
		t := time.NewTimer(c.l.timeout)
		defer t.Stop()
		select {
		case c.l.turns <- struct{}{}:
		case <-t.C:
			c.l.observe(Handshake{Wait: c.l.timeout, Err: errHandshakeWait})
			return errHandshakeWait
		case <-closed:
			return errClosedWaiting
		}
	}
	defer func() { <-c.l.turns }()
	begun := time.Now()
	defer func() {
		c.l.observe(Handshake{Wait: begun.Sub(start), Took: time.Since(begun), Resumed: c.ConnectionState().DidResume, Err: err,
			Hello: c.hc.hello.Load()})
	}()
	c.mu.Lock()
	c.shaking = true
	_ = c.Conn.SetDeadline(end)
	c.mu.Unlock()
	err = c.Conn.Handshake()
	c.shook.Store(err == nil)
	c.mu.Lock()
	c.shaking = false
	_ = c.Conn.SetReadDeadline(c.readDL)
	_ = c.Conn.SetWriteDeadline(c.writeDL)
	c.mu.Unlock()
	return err
}

func (c *admittedConn) Read(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if n > 0 && !c.read.Load() { // a store (a locked exchange) at the first read only
		c.read.Store(true)
	}
	return n, err
}

func (c *admittedConn) Write(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *admittedConn) SetDeadline(t time.Time) error      { return c.setDeadline(t, true, true) }
func (c *admittedConn) SetReadDeadline(t time.Time) error  { return c.setDeadline(t, true, false) }
func (c *admittedConn) SetWriteDeadline(t time.Time) error { return c.setDeadline(t, false, true) }

// setDeadline records the server's read and/or write deadline, and sets
// it unless the handshake's own is on.
func (c *admittedConn) setDeadline(t time.Time, read, write bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if read {
		c.readDL = t
	}
	if write {
		c.writeDL = t
	}
	switch {
	case c.shaking:
		return nil
	case read && write:
		return c.Conn.SetDeadline(t)
	case read:
		return c.Conn.SetReadDeadline(t)
	default:
		return c.Conn.SetWriteDeadline(t)
	}
}
