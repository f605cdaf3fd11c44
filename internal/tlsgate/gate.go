package tlsgate

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// NewListener serves TLS with cfg on inner's connections, running at most
// n handshakes at once. A connection waits at most timeout for its slot and
// then for its handshake; past it, the connection fails.
func NewListener(inner net.Listener, cfg *tls.Config, n int, timeout time.Duration) net.Listener {
	return &listener{Listener: inner, cfg: cfg, slots: make(chan struct{}, max(n, 1)), timeout: timeout}
}

type listener struct {
	net.Listener
	cfg     *tls.Config
	slots   chan struct{}
	timeout time.Duration
}

// Accept returns the next connection; its handshake runs on first use.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: tls.Server(c, l.cfg), l: l}, nil
}

// Conn is a server TLS connection whose handshake waits for a slot.
type Conn struct {
	*tls.Conn
	l    *listener
	once sync.Once
	err  error
}

// Handshake runs the handshake (once), within the listener's bound.
func (c *Conn) Handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.l.timeout)
		defer cancel()
		select {
		case c.l.slots <- struct{}{}:
		case <-ctx.Done():
			c.err = ctx.Err()
			return
		}
		defer func() { <-c.l.slots }()
		c.err = c.Conn.HandshakeContext(ctx)
	})
	return c.err
}

// Read reads after the handshake.
func (c *Conn) Read(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Write writes after the handshake.
func (c *Conn) Write(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
