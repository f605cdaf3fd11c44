package raftnet

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Name is the transport's name, as dragonboat reports it.
const Name = "shoal-raftnet"

const (
	// defaultDeadAfter is Factory.DeadAfter when it is zero: twice the
	// engine's default election timeout.
	defaultDeadAfter = time.Second
	// preambleTimeout bounds how long an accepted connection may take to
	// finish its TLS handshake and send its preamble.
	preambleTimeout = 10 * time.Second
	// ioTimeout bounds writing one frame and reading one frame's payload
	// once its header arrived.
	ioTimeout = 10 * time.Second
	// probeTimeout bounds the dial that tells whether a peer that closed
	// a connection is gone; a refusal comes at once.
	probeTimeout = time.Second
	// probeTries connections, probeSpacing apart, tell a peer that is
	// going away from one that stays.
	probeTries   = 3
	probeSpacing = 10 * time.Millisecond
	// redialGap is how often a connection to a peer that refuses
	// connections (restarting) dials again, at most.
	redialGap = 10 * time.Millisecond
)

// Factory makes the transport for a NodeHost
// (config.ExpertConfig.TransportFactory).
type Factory struct {
	// Receive, when set, is handed every message batch received from a
	// peer, with dragonboat's handler as deliver, in place of that
	// handler: it must pass every message on to deliver, at once or
	// later, and must be quick.
	Receive func(b pb.MessageBatch, deliver raftio.MessageHandler)
	// Created, when set, is handed dragonboat's handler once the
	// transport is made: what it delivers reaches Raft as if received.
	Created func(deliver raftio.MessageHandler)
	// Gone, when set, is told a peer's Raft address the first time a
	// connection to it is refused since it last accepted one — found at
	// once when the peer closes a message connection: nothing listens
	// there any more (its process ended).
	Gone func(target string)
	// Sent, when set, is handed every message batch just before it is
	// sent to a peer; it must keep nothing of b and be quick.
	Sent func(b *pb.MessageBatch)
	// DeadAfter is how long a connection may go without its peer
	// acknowledging what was sent on it, or answering keep-alive probes
	// while nothing is sent, before it is taken for dead and closed; a
	// dial that has not connected by then fails. About twice the election
	// timeout: a path silent that long has cost its groups their leader
	// anyway (dragonboat draws each timeout in [1, 2) election timeouts),
	// and acknowledgements come from the peer's kernel, so a busy peer
	// loses no connection unless its process stops reading for that long;
	// yet it is short enough that a path that went down is redialled soon
	// after it is back. Default (zero) 1s.
	DeadAfter time.Duration
}

var _ config.TransportFactory = Factory{}

// Create returns the transport; it listens once dragonboat starts it.
func (f Factory) Create(nh config.NodeHostConfig, messages raftio.MessageHandler, chunks raftio.ChunkHandler) raftio.ITransport {
	if f.Created != nil {
		f.Created(messages)
	}
	if f.Receive != nil {
		deliver := messages
		messages = func(b pb.MessageBatch) { f.Receive(b, deliver) }
	}
	dead := f.DeadAfter
	if dead <= 0 {
		dead = defaultDeadAfter
	}
	return &Transport{nh: nh, messages: messages, chunks: chunks, gone: f.Gone, sent: f.Sent,
		deadAfter: dead, conns: map[net.Conn]struct{}{}, down: map[string]bool{}}
}

// Validate accepts host:port addresses.
func (Factory) Validate(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	return err == nil && host != "" && port != ""
}

// Transport listens for peers' connections and dials theirs.
type Transport struct {
	nh       config.NodeHostConfig
	messages raftio.MessageHandler
	chunks   raftio.ChunkHandler
	gone     func(target string)
	sent     func(b *pb.MessageBatch)
	// deadAfter is Factory.DeadAfter (its default filled in).
	deadAfter time.Duration

	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // accepted and not yet closed
	down   map[string]bool       // targets whose last dial was refused
	closed bool
}

var _ raftio.ITransport = (*Transport)(nil)

// Name returns the transport's name.
func (t *Transport) Name() string { return Name }

// Start listens on the NodeHost's listen address (TLS with client
// certificates required when the NodeHost has MutualTLS).
func (t *Transport) Start() error {
	srv, err := t.nh.GetServerTLSConfig()
	if err != nil {
		return err
	}
	ln, err := t.listenConfig().Listen(context.Background(), "tcp", t.nh.GetListenAddress())
	if err != nil {
		return err
	}
	if srv != nil {
		ln = tls.NewListener(ln, srv)
	}
	t.ln = ln
	t.wg.Add(1)
	go t.accept()
	return nil
}

// Close stops listening, closes every accepted connection and waits for
// their readers to return.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	t.wg.Wait()
	return err
}

func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			t.serve(c)
			t.mu.Lock()
			delete(t.conns, c)
			t.mu.Unlock()
			_ = c.Close()
		}()
	}
}

// serve reads one accepted connection until it ends or carries garbage.
func (t *Transport) serve(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(context.Background(), preambleTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return
		}
	}
	k, err := readPreamble(c, preambleTimeout)
	if err != nil {
		return
	}
	var buf []byte
	for {
		payload, err := readFrame(c, buf, ioTimeout)
		if err != nil {
			return
		}
		if cap(payload) <= keepBuffer {
			buf = payload[:0]
		}
		switch {
		case k == kindMessages:
			var b pb.MessageBatch
			if b.Unmarshal(payload) != nil {
				return
			}
			t.messages(b)
		case len(payload) == 0: // a snapshot's end: every chunk was handled
			_ = c.SetWriteDeadline(time.Now().Add(ioTimeout))
			_, _ = c.Write([]byte{snapshotAck})
			return
		default:
			var ch pb.Chunk
			if ch.Unmarshal(payload) != nil || !t.chunks(ch) {
				return
			}
		}
	}
}

// probe finds out whether target, which closed a connection, is gone: a
// process that ends closes its connections and its listener one after the
// other, so a connection accepted at first is tried again a few times.
func (t *Transport) probe(target string) {
	for i := range probeTries {
		if i > 0 {
			time.Sleep(probeSpacing)
		}
		c, err := net.DialTimeout("tcp", target, probeTimeout)
		if err == nil {
			_ = c.Close()
			continue
		}
		if isRefused(err) {
			t.refusedBy(target)
		}
		return
	}
}

// refusedBy records that target refused a connection and tells gone the
// first time since it last accepted one.
func (t *Transport) refusedBy(target string) {
	t.mu.Lock()
	first := !t.down[target]
	t.down[target] = true
	t.mu.Unlock()
	if first && t.gone != nil {
		t.gone(target)
	}
}

// reached records that target accepted a connection.
func (t *Transport) reached(target string) {
	t.mu.Lock()
	delete(t.down, target)
	t.mu.Unlock()
}

// GetConnection returns a connection for message batches to target; to
// a peer that refuses connections (restarting), one that dials again on a
// later send (see msgConn.SendMessageBatch).
func (t *Transport) GetConnection(ctx context.Context, target string) (raftio.IConnection, error) {
	c := &msgConn{t: t, target: target}
	if err := c.dial(ctx); err != nil && !isRefused(err) {
		return nil, err
	}
	return c, nil
}

// GetSnapshotConnection returns a connection for one snapshot's chunks.
func (t *Transport) GetSnapshotConnection(ctx context.Context, target string) (raftio.ISnapshotConnection, error) {
	c, err := t.dial(ctx, target, kindSnapshot)
	if err != nil {
		return nil, err
	}
	return &snapConn{c: c}, nil
}

// dial connects to target (TLS with this replica's certificate when the
// NodeHost has MutualTLS) and sends the preamble of kind k, all within
// deadAfter.
func (t *Transport) dial(ctx context.Context, target string, k kind) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.deadAfter)
	defer cancel()
	c, err := t.dialer().DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	cli, err := t.nh.GetClientTLSConfig(target)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	if cli != nil {
		tc := tls.Client(c, cli)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetWriteDeadline(dl)
	}
	if _, err := c.Write(preamble(k)); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
