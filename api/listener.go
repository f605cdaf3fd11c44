package api

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shoal/internal/clock"
)

// Guard wraps a manager's API listener (below TLS, so TLS connections
// count too) so that the API keeps answering when file descriptors run
// short. An agent fleet's reconnect storm (every agent's heartbeat
// connection moving to a new leader at once, beside the long polls it
// already holds) once took a replica past its open-file limit; the HTTP
// server took the failed accept for a permanent error and stopped, and
// the replica went on in Raft with no API at all. Now:
//   - an accept that fails for want of descriptors is retried, backing off
//     from 5 ms to 1 s, and logged at most once a minute;
//   - at most maxConns connections are open at once (default: the
//     process's open-file limit less an eighth, at least 256, kept for
//     Raft, the log store and snapshots); one more is closed at once, so
//     its client retries (another manager, or later) instead of the
//     replica running out.
//
// maxConns 0 takes the default; clk nil, the wall clock.
func Guard(ln net.Listener, maxConns int, clk clock.Clock, logf func(format string, args ...any)) net.Listener {
	if maxConns <= 0 {
		maxConns = defaultMaxConns()
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &guardedListener{Listener: ln, max: int64(maxConns), logf: logf, clk: clk}
}

// defaultMaxConns is the open-file limit less what the rest of the
// replica needs.
func defaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 || lim.Cur > 1<<20 {
		return 1 << 16
	}
	n := int(lim.Cur)
	return max(n-max(n/8, 256), 64)
}

type guardedListener struct {
	net.Listener
	open atomic.Int64
	max  int64
	logf func(format string, args ...any)
	clk  clock.Clock

	mu       sync.Mutex
	loggedAt map[string]time.Time // by kind of trouble
}

// Accept returns the next connection, waiting out a shortage of
// descriptors and refusing connections past the cap.
func (l *guardedListener) Accept() (net.Conn, error) {
	delay := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !descriptorShortage(err) {
				return nil, err
			}
			l.note("short", "api: accepting connections: %v; open API connections: %d; retrying", err, l.open.Load())
			<-l.clk.After(delay)
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			l.note("full", "api: %d connections are open, the most this manager takes; refusing new ones until some close", l.max)
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// note logs a line of kind at most once a minute.
func (l *guardedListener) note(kind, format string, args ...any) {
	now := l.clk.Now()
	l.mu.Lock()
	if l.loggedAt == nil {
		l.loggedAt = map[string]time.Time{}
	}
	last, seen := l.loggedAt[kind]
	if seen && now.Sub(last) < time.Minute {
		l.mu.Unlock()
		return
	}
	l.loggedAt[kind] = now
	l.mu.Unlock()
	l.logf(format, args...)
}

// descriptorShortage reports whether err says the process or the system
// is out of file descriptors or socket buffers: a wait, not an end.
func descriptorShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// countedConn gives its slot back when closed (once).
type countedConn struct {
	net.Conn
	l      *guardedListener
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
