package client

import (
	"net"
	"sync"
	"time"
)

// callConn is an agent's TCP connection, under its TLS connection, whose
// deadlines are armed only while a read or a write is under way. The HTTP
// client sets a call's deadlines before the call and leaves them set when
// the call is done, so on an idle keep-alive connection they fired later
// for nothing: a heartbeat's read and write deadlines are its period, and
// the next beat comes a period ±10 % later, so about every other beat of
// every agent left two timers that woke the process (a runtime timer, and
// often a thread sleeping in the kernel) with no read or write to time
// out. A deadline still ends a read or write under way, or one begun after
// it passed, exactly as the connection's own would.
type callConn struct {
	net.Conn
	mu             sync.Mutex
	rd, wd         time.Time // the deadlines asked for
	reading, write bool      // a Read / Write is under way (its deadline armed)
}

func (c *callConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *callConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = t
	if c.reading {
		return c.Conn.SetReadDeadline(t)
	}
	return nil
}

func (c *callConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wd = t
	if c.write {
		return c.Conn.SetWriteDeadline(t)
	}
	return nil
}

func (c *callConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	c.reading = true
	armed := !c.rd.IsZero()
	if armed {
		if err := c.Conn.SetReadDeadline(c.rd); err != nil {
			c.reading = false
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.reading = false
	if armed || !c.rd.IsZero() {
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
	c.mu.Unlock()
	return n, err
}

func (c *callConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.write = true
	armed := !c.wd.IsZero()
	if armed {
		if err := c.Conn.SetWriteDeadline(c.wd); err != nil {
			c.write = false
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.write = false
	if armed || !c.wd.IsZero() {
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
	c.mu.Unlock()
	return n, err
}
