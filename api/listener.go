package api

import (
	"container/list"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

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
//     Raft, the log store and snapshots). At the cap, the connection idle
//     longest between two requests (a client's keep-alive; the server
//     tells which through TrackIdle) is closed to make room: its client
//     dials again when it next needs one. Only when none is idle is the
//     new connection closed at once, so its client retries (another
//     manager, or later) instead of the replica running out. A new leader
//     once refused ten thousand agents' heartbeats for half a minute while
//     it held their idle short-call connections from before.
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

	// idle lists the connections waiting between requests, idle longest
	// first; every request moves its connection off and back on, so it
	// has a lock of its own (not the one of the rare log lines above).
	idleMu sync.Mutex
	idle   list.List // of *countedConn
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
			if idle := l.oldestIdle(); idle != nil {
				_ = idle.Close() // gives its slot back
				l.note("evict", "api: %d connections are open, the most this manager takes; closing the longest idle ones to make room", l.max)
				l.open.Add(1)
				return &countedConn{Conn: c, l: l}, nil
			}
			_ = c.Close()
			l.note("full", "api: %d connections are open, the most this manager takes, none of them idle; refusing new ones until some close", l.max)
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// oldestIdle takes the connection idle longest off the idle list; nil if
// none is idle.
func (l *guardedListener) oldestIdle() *countedConn {
	l.idleMu.Lock()
	defer l.idleMu.Unlock()
	e := l.idle.Front()
	if e == nil {
		return nil
	}
	c := e.Value.(*countedConn)
	l.idle.Remove(e)
	c.idleAt = nil
	return c
}

// setIdle puts c at the back of the idle list, or takes it off.
func (l *guardedListener) setIdle(c *countedConn, idle bool) {
	l.idleMu.Lock()
	defer l.idleMu.Unlock()
	if c.idleAt != nil {
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	if idle && !c.closed.Load() {
		c.idleAt = l.idle.PushBack(c)
	}
}

// TrackIdle is the API server's connection-state hook: it tells a guarded
// connection when it waits between requests, so that the guard may close
// it to make room. It finds the guarded connection under whatever wraps
// it (TLS, the handshake turn), each wrapper giving the one below with
// NetConn.
func TrackIdle(c net.Conn, st fasthttp.ConnState) {
	for {
		if cc, ok := c.(*countedConn); ok {
			cc.l.setIdle(cc, st == fasthttp.StateIdle)
			return
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = w.NetConn()
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
	idleAt *list.Element // on l.idle while idle (l.idleMu)
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.setIdle(c, false)
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
