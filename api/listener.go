package api

import (
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

	// Every request marks its connection busy, then idle again: each
	// connection keeps when it went idle itself (a turn of idleSeq, 0 while
	// busy), so that a request takes no lock. Only a new connection at the
	// cap looks through every open one (conns, changed at accept and
	// close only) for the one idle longest. (A list of the idle ones under
	// one lock, taken twice per request, was a share of every agent call.)
	idleSeq atomic.Int64
	connsMu sync.Mutex
	conns   map[*countedConn]struct{}
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
				return l.counted(c), nil
			}
			_ = c.Close()
			l.note("full", "api: %d connections are open, the most this manager takes, none of them idle; refusing new ones until some close", l.max)
			continue
		}
		return l.counted(c), nil
	}
}

// oldestIdle takes the connection idle longest (marking it busy, so no
// other takes it); nil if none is idle.
func (l *guardedListener) oldestIdle() *countedConn {
	l.connsMu.Lock()
	defer l.connsMu.Unlock()
	for {
		var oldest *countedConn
		var since int64
		for c := range l.conns {
			if s := c.idleSince.Load(); s != 0 && (oldest == nil || s < since) {
				oldest, since = c, s
			}
		}
		if oldest == nil {
			return nil
		}
		if oldest.idleSince.CompareAndSwap(since, 0) {
			return oldest
		}
		// It began a request (or went idle again) meanwhile: look again.
	}
}

// track adds c to the open connections, or takes it off.
func (l *guardedListener) track(c *countedConn, open bool) {
	l.connsMu.Lock()
	defer l.connsMu.Unlock()
	if l.conns == nil {
		l.conns = map[*countedConn]struct{}{}
	}
	if open {
		l.conns[c] = struct{}{}
	} else {
		delete(l.conns, c)
	}
}

// setIdle marks c idle from now on, or busy.
func (l *guardedListener) setIdle(c *countedConn, idle bool) {
	if idle && !c.closed.Load() {
		c.idleSince.Store(l.idleSeq.Add(1))
		return
	}
	c.idleSince.Store(0)
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

// counted returns c counted open and tracked.
func (l *guardedListener) counted(c net.Conn) *countedConn {
	cc := &countedConn{Conn: c, l: l}
	l.track(cc, true)
	return cc
}

// countedConn gives its slot back when closed (once).
type countedConn struct {
	net.Conn
	l         *guardedListener
	closed    atomic.Bool
	idleSince atomic.Int64 // the turn of l.idleSeq it went idle at; 0 while busy
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.setIdle(c, false)
		c.l.track(c, false)
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
