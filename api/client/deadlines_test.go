package client

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// deadlineLog is a net.Conn that records the deadlines set on it.
type deadlineLog struct {
	net.Conn
	mu     sync.Mutex
	rd, wd time.Time // the last ones set
}

func (d *deadlineLog) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.rd = t
	d.mu.Unlock()
	return d.Conn.SetReadDeadline(t)
}

func (d *deadlineLog) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	d.wd = t
	d.mu.Unlock()
	return d.Conn.SetWriteDeadline(t)
}

func (d *deadlineLog) last() (rd, wd time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rd, d.wd
}

// A call's deadlines stay armed on the connection only while it reads or
// writes: after an answer, an idle connection holds no timer.
func TestCallConnArmsDeadlinesOnlyWhileInUse(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	log := &deadlineLog{Conn: a}
	c := &callConn{Conn: log}
	dl := time.Now().Add(time.Minute)
	_ = c.SetWriteDeadline(dl)
	_ = c.SetReadDeadline(dl)
	go func() {
		buf := make([]byte, 4)
		_, _ = b.Read(buf)
		_, _ = b.Write([]byte("pong"))
	}()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if rd, wd := log.last(); !rd.IsZero() || !wd.IsZero() {
		t.Fatalf("after the call the connection keeps deadlines armed: read %v, write %v", rd, wd)
	}
}

// The deadlines still do what a connection's own do: a read past its
// deadline times out, a read begun after the deadline fails at once, and a
// deadline moved while a read waits ends that read.
func TestCallConnDeadlinesEndReads(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &callConn{Conn: a}
	buf := make([]byte, 1)

	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want a timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a read with a 30ms deadline took %v", took)
	}
	_ = c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read after its deadline: %v, want a timeout", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read wait (it ends either way)
	_ = c.SetReadDeadline(time.Now())
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a waiting read given a deadline: %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a deadline set while a read waited did not end it")
	}
	_ = c.SetDeadline(time.Time{})
	go func() { _, _ = b.Write([]byte("x")) }()
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("a read without a deadline: %v", err)
	}
}

// The agents' TLS connections are set up over a callConn.
func TestAgentConnectionsArmDeadlinesOnlyInCalls(t *testing.T) {
	m := newTLSManager(t, false)
	d := newTLSDialer(m.client, &DialStats{})
	conn, err := d.dial(m.addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc, ok := conn.(*tls.Conn)
	if !ok {
		t.Fatalf("the dialer made a %T, want a TLS connection", conn)
	}
	if _, ok := tc.NetConn().(*callConn); !ok {
		t.Fatalf("the TLS connection runs over a %T, want a callConn", tc.NetConn())
	}
}
