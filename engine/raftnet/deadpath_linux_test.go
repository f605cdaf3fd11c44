package raftnet

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// stallProxy forwards connections to target until it is stalled: then it
// reads nothing more from the dialers (new connections included) but
// keeps every socket open, so their receive windows fill and close and
// what a dialer sends stays unacknowledged, which TCP_USER_TIMEOUT bounds
// as it does data lost behind a silent drop (Linux 5.11 on; a drop itself
// needs root to make). Its receive buffers are a few KiB, so a window
// closes soon.
type stallProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	open     chan struct{} // closed while forwarding
	accepted int
	conns    []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, open: make(chan struct{})}
	close(p.open)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.resumeLocked()
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.accepted++
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.forward(up, c)
			}()
		}
	}()
	return p
}

// forward copies from src to dst while the proxy is not stalled.
func (p *stallProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 4096)
	for {
		p.mu.Lock()
		open := p.open
		p.mu.Unlock()
		<-open
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = make(chan struct{})
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
}

func (p *stallProxy) resumeLocked() {
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

func (p *stallProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// A connection whose peer stops acknowledging is taken for dead within
// about DeadAfter, not after TCP's back-off (or the 10s write deadline):
// its watcher sees it end and the send on it fails, so dragonboat reports
// the peer unreachable. Once the path works again the next send dials a
// new connection and arrives.
func TestDeadPathIsNoticedAndRedialled(t *testing.T) {
	const dead = 300 * time.Millisecond
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	p := newStallProxy(t, addr)
	local := Factory{DeadAfter: dead}.Create(config.NodeHostConfig{RaftAddress: freeAddr(t)},
		newInbox().message, newInbox().chunk).(*Transport)
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	conn := connect(t, local, p.addr())
	if err := conn.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 1)

	p.stall()
	first := conn.gone
	// More than the proxy's window and this end's send buffer hold, so
	// the write waits on data the peer does not acknowledge.
	big := pb.MessageBatch{Requests: []pb.Message{{Type: pb.Replicate, ShardID: 1, From: 1, To: 2, Term: 2,
		Entries: []pb.Entry{{Cmd: make([]byte, 8<<20)}}}}}
	sent := make(chan error, 1)
	began := time.Now()
	go func() { sent <- conn.SendMessageBatch(big) }()
	// The kernel notices at its first probe or retransmission after
	// DeadAfter (at most one 200ms minimum RTO late); the rest is slack
	// for a loaded machine.
	bound := 2*dead + time.Second
	select {
	case <-first:
	case <-time.After(bound):
		t.Fatalf("a connection whose peer stopped acknowledging was still open after %v (DeadAfter %v)", bound, dead)
	}
	noticed := time.Since(began)
	// The send tried once more on a fresh connection, which died too.
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("a send over a dead path reported success")
		}
	case <-time.After(2 * bound):
		t.Fatalf("a send over a dead path had not failed after %v", 2*bound)
	}
	failed := time.Since(began)

	p.resume()
	before := p.connections()
	if err := conn.SendMessageBatch(batch(3)); err != nil {
		t.Fatalf("send once the path works again: %v", err)
	}
	in.waitTerm(t, 3)
	if p.connections() == before {
		t.Fatal("the message arrived without a new connection")
	}
	t.Logf("DeadAfter %v: connection taken for dead after %v, send failed after %v", dead, noticed.Round(time.Millisecond), failed.Round(time.Millisecond))
}

// Both ends of a connection carry the dead-path settings: the dialer's
// socket and the one the listener accepted.
func TestBothEndsCarryDeadPathSettings(t *testing.T) {
	const dead = 4 * time.Second
	addr := freeAddr(t)
	in := newInbox()
	nh := config.NodeHostConfig{RaftAddress: addr}
	peer := Factory{DeadAfter: dead}.Create(nh, in.message, in.chunk).(*Transport)
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	local := Factory{DeadAfter: dead}.Create(config.NodeHostConfig{RaftAddress: freeAddr(t)},
		newInbox().message, newInbox().chunk).(*Transport)
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	conn := connect(t, local, addr)
	if err := conn.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 1)
	peer.mu.Lock()
	var accepted []net.Conn
	for c := range peer.conns {
		accepted = append(accepted, c)
	}
	peer.mu.Unlock()
	if len(accepted) != 1 {
		t.Fatalf("the peer holds %d accepted connections, want 1", len(accepted))
	}
	want := map[string][3]int{ // level, option, value
		"TCP_USER_TIMEOUT (ms)": {syscall.IPPROTO_TCP, tcpUserTimeout, int(dead / time.Millisecond)},
		"SO_KEEPALIVE":          {syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		"TCP_KEEPIDLE (s)":      {syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 2},
		"TCP_KEEPINTVL (s)":     {syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 1},
	}
	for end, c := range map[string]net.Conn{"dialed": conn.c, "accepted": accepted[0]} {
		raw, err := c.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			var got int
			var gerr error
			if err := raw.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), w[0], w[1]) }); err != nil {
				t.Fatal(err)
			}
			if gerr != nil {
				t.Fatalf("%s: %s: %v", end, name, gerr)
			}
			if got != w[2] {
				t.Errorf("%s connection: %s is %d, want %d", end, name, got, w[2])
			}
		}
	}
}

// A snapshot connection whose peer stops acknowledging fails its chunk
// within about DeadAfter, and closing it then waits for nothing.
func TestDeadSnapshotPathFailsTheSnapshot(t *testing.T) {
	const dead = 300 * time.Millisecond
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	p := newStallProxy(t, addr)
	local := Factory{DeadAfter: dead}.Create(config.NodeHostConfig{RaftAddress: freeAddr(t)},
		newInbox().message, newInbox().chunk).(*Transport)
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	sc, err := local.GetSnapshotConnection(context.Background(), p.addr())
	if err != nil {
		t.Fatal(err)
	}
	p.stall()
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		err := sc.SendChunk(pb.Chunk{ShardID: 1, ReplicaID: 2, ChunkCount: 1, Data: make([]byte, 8<<20)})
		sc.Close()
		done <- err
	}()
	bound := 2*dead + time.Second
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a chunk sent over a dead path reported success")
		}
	case <-time.After(bound):
		t.Fatalf("a snapshot sent over a dead path had not failed and closed after %v (DeadAfter %v)", bound, dead)
	}
	t.Logf("DeadAfter %v: snapshot failed and closed after %v", dead, time.Since(began).Round(time.Millisecond))
	if err := sc.SendChunk(pb.Chunk{ShardID: 1, ReplicaID: 2, ChunkId: 1, ChunkCount: 2}); err == nil {
		t.Fatal("a chunk after a failed one was sent")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.chunks) != 0 {
		t.Fatalf("chunks of a failed snapshot reached Raft: %v", in.chunks)
	}
}
