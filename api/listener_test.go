package api

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/internal/clock"
)

// scriptedListener hands out what its script says: an error or a
// connection, in order, then blocks until closed.
type scriptedListener struct {
	next   chan any // net.Conn or error
	closed chan struct{}
	once   sync.Once
}

func newScripted(items ...any) *scriptedListener {
	l := &scriptedListener{next: make(chan any, len(items)+8), closed: make(chan struct{})}
	for _, it := range items {
		l.next <- it
	}
	return l
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	select {
	case it := <-l.next:
		if err, ok := it.(error); ok {
			return nil, err
		}
		return it.(net.Conn), nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *scriptedListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *scriptedListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// watchedConn records whether it was closed.
type watchedConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func newWatched() *watchedConn {
	a, b := net.Pipe()
	go func() { _, _ = b.Read(make([]byte, 1)) }()
	return &watchedConn{Conn: a, closed: make(chan struct{})}
}

func (c *watchedConn) Close() error { c.once.Do(func() { close(c.closed) }); return c.Conn.Close() }

func acceptAsync(ln net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

// expectAccepted waits (10 s at most) for the guarded listener to hand on
// want.
func expectAccepted(t *testing.T, got <-chan net.Conn, want net.Conn, when string) {
	t.Helper()
	select {
	case c := <-got:
		if c == nil || c.(*countedConn).Conn != want {
			t.Fatalf("accepted %v, want the connection %s", c, when)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no connection accepted %s", when)
	}
}

// Running out of file descriptors is waited out, backing off, and logged
// once; the connection accepted after it is handed on. Another accept
// error still ends the listener.
func TestGuardWaitsOutDescriptorShortage(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	want := newWatched()
	clk := clock.NewFake(time.Unix(1e9, 0))
	var mu sync.Mutex
	var logged []string
	ln := Guard(newScripted(emfile, emfile, emfile, want, fmt.Errorf("listener broke")), 10, clk, func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	})
	got := acceptAsync(ln)
	var waits []time.Duration
	for range 3 {
		if err := clk.BlockUntil(1, 10*time.Second); err != nil {
			t.Fatalf("the listener did not wait after a shortage: %v", err)
		}
		at, _ := clk.Next()
		waits = append(waits, at.Sub(clk.Now()))
		clk.AdvanceToNext()
	}
	expectAccepted(t, got, want, "after the shortage")
	if waits[0] != 5*time.Millisecond || waits[1] != 10*time.Millisecond || waits[2] != 20*time.Millisecond {
		t.Fatalf("waits %v, want 5ms, 10ms, 20ms", waits)
	}
	mu.Lock()
	if len(logged) != 1 || !strings.Contains(logged[0], "too many open files") {
		t.Fatalf("logged %q, want one line naming the shortage", logged)
	}
	mu.Unlock()
	if _, err := ln.Accept(); err == nil || !strings.Contains(err.Error(), "listener broke") {
		t.Fatalf("another accept error: %v, want it returned", err)
	}
}

// At the cap, a new connection is closed at once; closing an accepted one
// (twice, even) frees exactly one slot.
func TestGuardCapsOpenConnections(t *testing.T) {
	first, second, refused, third := newWatched(), newWatched(), newWatched(), newWatched()
	sl := newScripted(first, second, refused)
	ln := Guard(sl, 2, clock.NewFake(time.Unix(1e9, 0)), nil)
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); err != nil {
		t.Fatal(err)
	}
	got := acceptAsync(ln)
	select {
	case <-refused.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a connection past the cap was not closed")
	}
	select {
	case c := <-got:
		t.Fatalf("accepted %v past the cap", c)
	default:
	}
	_ = a.Close()
	_ = a.Close()
	sl.next <- third
	expectAccepted(t, got, third, "after one closed")
	if n := ln.(*guardedListener).open.Load(); n != 2 {
		t.Fatalf("%d connections counted open, want 2", n)
	}
}

// At the cap, the connection idle longest is closed to make room for a
// new one (not one idle since later, nor one serving a request); with
// none idle, the new one is refused.
func TestGuardClosesTheLongestIdleToMakeRoom(t *testing.T) {
	first, second, third, fourth := newWatched(), newWatched(), newWatched(), newWatched()
	sl := newScripted(first, second)
	ln := Guard(sl, 2, clock.NewFake(time.Unix(1e9, 0)), nil)
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	TrackIdle(a, fasthttp.StateActive)
	TrackIdle(a, fasthttp.StateIdle) // idle first
	TrackIdle(b, fasthttp.StateIdle)
	TrackIdle(b, fasthttp.StateActive)
	TrackIdle(b, fasthttp.StateIdle) // idle since later
	sl.next <- third
	expectAccepted(t, acceptAsync(ln), third, "with an idle one to close")
	select {
	case <-first.closed:
	default:
		t.Fatal("the connection idle longest was not closed")
	}
	select {
	case <-second.closed:
		t.Fatal("a connection idle since later was closed")
	default:
	}
	TrackIdle(b, fasthttp.StateActive) // serving a request now
	got := acceptAsync(ln)
	sl.next <- fourth
	select {
	case <-fourth.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("with none idle, a connection past the cap was not closed")
	}
	select {
	case <-second.closed:
		t.Fatal("a connection serving a request was closed")
	default:
	}
	if n := ln.(*guardedListener).open.Load(); n != 2 {
		t.Fatalf("%d connections counted open, want 2", n)
	}
	_ = ln.Close()
	<-got
}

// fasthttp's error for a connection the replica closed itself (an idle one
// closed at the cap) is not logged; any other is.
func TestServerLogSkipsConnectionsItClosed(t *testing.T) {
	var lines []string
	l := logger(func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	l.Printf("error when serving connection %q: %v", "a", &net.OpError{Op: "set", Net: "tcp", Err: net.ErrClosed})
	l.Printf("error when serving connection %q: %v", "b", syscall.ECONNRESET)
	if len(lines) != 1 || !strings.Contains(lines[0], `"b"`) {
		t.Fatalf("logged %q, want only the reset connection's line", lines)
	}
}

// BenchmarkTrackIdle is a request's two state changes (busy, then idle
// again) on connections of one guarded listener, from parallel servers'
// goroutines, 1,000 connections open.
func BenchmarkTrackIdle(b *testing.B) {
	ln := Guard(newScripted(), 1<<20, nil, nil).(*guardedListener)
	conns := make([]net.Conn, 1000)
	for i := range conns {
		conns[i] = ln.counted(newWatched())
		TrackIdle(conns[i], fasthttp.StateIdle)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := conns[int(next.Add(1))%len(conns)]
		for pb.Next() {
			TrackIdle(c, fasthttp.StateActive)
			TrackIdle(c, fasthttp.StateIdle)
		}
	})
}
