package raftnet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"shoal/internal/freeport"
	"shoal/security"
)

// inbox records what a transport received.
type inbox struct {
	mu     sync.Mutex
	terms  []uint64           // of message batches' first message
	chunks []uint64           // chunk IDs
	sizes  []int              // of message batches, as encoded
	types  [][]pb.MessageType // of each message batch's messages
	got    chan struct{}
}

func newInbox() *inbox { return &inbox{got: make(chan struct{}, 1024)} }

func (in *inbox) message(b pb.MessageBatch) {
	in.mu.Lock()
	for _, m := range b.Requests {
		in.terms = append(in.terms, m.Term)
	}
	in.sizes = append(in.sizes, b.Size())
	var types []pb.MessageType
	for _, m := range b.Requests {
		types = append(types, m.Type)
	}
	in.types = append(in.types, types)
	in.mu.Unlock()
	in.got <- struct{}{}
}

func (in *inbox) chunk(c pb.Chunk) bool {
	in.mu.Lock()
	in.chunks = append(in.chunks, c.ChunkId)
	in.mu.Unlock()
	return true
}

// waitTerm waits (bounded) until a message of term arrived.
func (in *inbox) waitTerm(t *testing.T, term uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		in.mu.Lock()
		for _, x := range in.terms {
			if x == term {
				in.mu.Unlock()
				return
			}
		}
		in.mu.Unlock()
		select {
		case <-in.got:
		case <-deadline:
			t.Fatalf("message of term %d never arrived", term)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// start starts a transport at addr that records into in.
func start(t *testing.T, nh config.NodeHostConfig, addr string, in *inbox) *Transport {
	t.Helper()
	nh.RaftAddress = addr
	tr := Factory{}.Create(nh, in.message, in.chunk).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// connect returns a message connection from local to addr, closed when
// the test ends.
func connect(t *testing.T, local *Transport, addr string) *msgConn {
	t.Helper()
	c, err := local.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.(*msgConn)
}

func batch(term uint64) pb.MessageBatch {
	return pb.MessageBatch{Requests: []pb.Message{{Type: pb.Heartbeat, ShardID: 1, From: 1, To: 2, Term: term}}}
}

// A peer that restarted at its address gets the very next message sent on
// a connection made to its previous incarnation (the follower-to-follower
// case: nothing was sent on it in between, so nothing had failed yet).
func TestRestartedPeerGetsTheNextMessage(t *testing.T) {
	addr := freeAddr(t)
	in1 := newInbox()
	peer := start(t, config.NodeHostConfig{}, addr, in1)
	local := start(t, config.NodeHostConfig{}, freeAddr(t), newInbox())

	conn := connect(t, local, addr)
	if err := conn.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	in1.waitTerm(t, 1)

	_ = peer.Close()
	in2 := newInbox()
	start(t, config.NodeHostConfig{}, addr, in2)
	// The watcher sees the old incarnation's close (a real peer's kill
	// shows the same way: its kernel closes the sockets).
	select {
	case <-conn.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never noticed its peer closed it")
	}
	if err := conn.SendMessageBatch(batch(2)); err != nil {
		t.Fatalf("send after the peer restarted: %v", err)
	}
	in2.waitTerm(t, 2)
}

// A peer that refuses connections (restarting) loses what is sent
// meanwhile but fails no send, so dragonboat's breaker never shuts it out;
// it is reported gone once, and gets the next message once it is back. A
// host that cannot be reached fails the send, so dragonboat reports it
// unreachable and backs off.
func TestRefusingPeerLosesMessagesButFailsNoSend(t *testing.T) {
	addr := freeAddr(t)
	peer := start(t, config.NodeHostConfig{}, addr, newInbox())
	var gone []string
	var mu sync.Mutex
	nh := config.NodeHostConfig{RaftAddress: freeAddr(t)}
	local := Factory{Gone: func(target string) {
		mu.Lock()
		gone = append(gone, target)
		mu.Unlock()
	}}.Create(nh, newInbox().message, newInbox().chunk).(*Transport)
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	conn := connect(t, local, addr)
	_ = peer.Close()
	<-conn.gone
	for term := uint64(1); term <= 3; term++ {
		if err := conn.SendMessageBatch(batch(term)); err != nil {
			t.Fatalf("send %d to a peer that refuses connections: %v", term, err)
		}
	}
	if c, err := local.GetConnection(context.Background(), addr); err != nil {
		t.Fatalf("a connection to a peer that refuses connections failed: %v", err)
	} else {
		c.Close()
	}
	mu.Lock()
	if len(gone) != 1 || gone[0] != addr {
		t.Fatalf("reported gone %v, want [%s] once", gone, addr)
	}
	mu.Unlock()

	// Back: a send within redialGap of the last refusal is dropped, so
	// send until one arrives.
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	deadline := time.After(10 * time.Second)
	for arrived := false; !arrived; {
		if err := conn.SendMessageBatch(batch(4)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-in.got:
			arrived = true
		case <-time.After(redialGap):
		case <-deadline:
			t.Fatal("the peer that came back got nothing")
		}
	}

	// The .invalid domain never resolves.
	if _, err := local.GetConnection(context.Background(), "replica.invalid:7100"); err == nil {
		t.Fatal("a connection to a host that cannot be reached was made")
	}
}

// When a snapshot connection's Close returns, the receiver has handled
// every chunk sent before it.
func TestSnapshotCloseWaitsForEveryChunk(t *testing.T) {
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	local := start(t, config.NodeHostConfig{}, freeAddr(t), newInbox())
	sc, err := local.GetSnapshotConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for id := range uint64(5) {
		if err := sc.SendChunk(pb.Chunk{ShardID: 1, ReplicaID: 2, ChunkId: id, ChunkCount: 5, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	sc.Close()
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.chunks) != 5 {
		t.Fatalf("Close returned after %d of 5 chunks were handled", len(in.chunks))
	}
}

// A connection that does not speak this protocol, or sends a frame whose
// checksum does not match, is closed without anything reaching Raft.
func TestGarbageIsRefused(t *testing.T) {
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)

	junk, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	_, _ = junk.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	_ = junk.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := junk.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection without the preamble was answered")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection without the preamble was kept open")
	}

	bad, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	b := batch(7)
	frame := make([]byte, headerSize+b.SizeUpperLimit())
	payload := pb.MustMarshalTo(&b, frame[headerSize:])
	frame = frame[:headerSize+len(payload)]
	binary.BigEndian.PutUint32(frame[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(frame[4:8], 12345) // wrong checksum
	_, _ = bad.Write(append(preamble(kindMessages), frame...))
	_ = bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := bad.Read(make([]byte, 1)); err == nil {
		t.Fatal("a corrupt frame was answered")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection with a corrupt frame was kept open")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.terms) != 0 {
		t.Fatalf("garbage reached Raft: %v", in.terms)
	}
}

// With mutual TLS both ends present certificates of the cluster's CA.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := security.NewCA(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nh := func(name string) config.NodeHostConfig {
		key, err := security.NewKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		chain, err := ca.Issue(rand.Reader, security.Request{Role: security.RoleManager, Name: name, Key: &key.PublicKey, Hosts: []string{"127.0.0.1"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		kp, err := security.KeyPEM(key)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{"ca.pem": security.CertPEM(ca.Root.Raw), name + ".pem": security.CertPEM(chain...), name + ".key": kp}
		for f, b := range files {
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return config.NodeHostConfig{MutualTLS: true, CAFile: filepath.Join(dir, "ca.pem"),
			CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+".key")}
	}
	addr := freeAddr(t)
	in := newInbox()
	start(t, nh("1"), addr, in)
	local := start(t, nh("2"), freeAddr(t), newInbox())
	conn := connect(t, local, addr)
	if err := conn.SendMessageBatch(batch(3)); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 3)

	plain := start(t, config.NodeHostConfig{}, freeAddr(t), newInbox())
	if c, err := plain.GetConnection(context.Background(), addr); err == nil {
		_ = c.SendMessageBatch(batch(4))
		c.Close()
	}
	local2 := connect(t, local, addr)
	if err := local2.SendMessageBatch(batch(5)); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 5)
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, x := range in.terms {
		if x == 4 {
			t.Fatal("a peer without a certificate reached Raft")
		}
	}
}

// The Sent hook sees every batch sent to a peer, before the peer has it,
// and no batch that was not sent (a peer refusing connections).
func TestSentSeesWhatLeaves(t *testing.T) {
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	var mu sync.Mutex
	var sent []uint64 // terms
	nh := config.NodeHostConfig{RaftAddress: freeAddr(t)}
	local := Factory{Sent: func(b *pb.MessageBatch) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b.Requests {
			sent = append(sent, m.Term)
		}
	}}.Create(nh, newInbox().message, newInbox().chunk).(*Transport)
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	conn := connect(t, local, addr)
	for term := uint64(1); term <= 3; term++ {
		if err := conn.SendMessageBatch(batch(term)); err != nil {
			t.Fatal(err)
		}
	}
	in.waitTerm(t, 3)
	refusing := connect(t, local, freeAddr(t)) // nothing listens there
	if err := refusing.SendMessageBatch(batch(4)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 3 || sent[0] != 1 || sent[2] != 3 {
		t.Fatalf("the hook saw terms %v, want 1, 2, 3 (4 went nowhere)", sent)
	}
}

// A batch bigger than a frame's budget (messages queued up behind a slow
// peer) arrives as several batches, in order, none much bigger than the
// budget, so neither side holds a buffer the size of the whole batch; a
// message bigger than the budget still arrives whole.
func TestBigBatchGoesInBoundedFrames(t *testing.T) {
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	local := start(t, config.NodeHostConfig{}, freeAddr(t), newInbox())
	conn := connect(t, local, addr)
	replicate := func(term uint64, bytes int) pb.Message {
		return pb.Message{Type: pb.Replicate, ShardID: 1, From: 1, To: 2, Term: term,
			Entries: []pb.Entry{{Index: term, Term: term, Cmd: make([]byte, bytes)}}}
	}
	var b pb.MessageBatch
	for term := uint64(1); term <= 24; term++ { // 6 MiB
		b.Requests = append(b.Requests, replicate(term, 256<<10))
	}
	b.Requests = append(b.Requests, replicate(25, 3<<20), replicate(26, 10))
	if err := conn.SendMessageBatch(b); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 26)
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, term := range in.terms {
		if term != uint64(i+1) {
			t.Fatalf("terms arrived as %v, want 1 to 26 in order", in.terms)
		}
	}
	if len(in.sizes) < 7 {
		t.Fatalf("6 MiB of messages and one of 3 MiB arrived in %d batches %v, want at least 7", len(in.sizes), in.sizes)
	}
	for _, n := range in.sizes {
		if n > frameBudget+(256<<10) && n < 3<<20 {
			t.Fatalf("a batch of %d bytes arrived (sizes %v): more than the budget %d and not the one big message", n, in.sizes, frameBudget)
		}
	}
}

// A batch too big for one frame sends its heartbeats and other control
// messages first, and its Replicate messages after them in their order: a
// heartbeat queued behind megabytes of entries reaches the follower in the
// first frame.
func TestControlMessagesGoAheadOfEntries(t *testing.T) {
	addr := freeAddr(t)
	in := newInbox()
	start(t, config.NodeHostConfig{}, addr, in)
	local := start(t, config.NodeHostConfig{}, freeAddr(t), newInbox())
	conn := connect(t, local, addr)
	var b pb.MessageBatch
	for term := uint64(1); term <= 8; term++ { // 2 MiB
		b.Requests = append(b.Requests, pb.Message{Type: pb.Replicate, ShardID: 1, From: 1, To: 2, Term: term,
			Entries: []pb.Entry{{Index: term, Term: term, Cmd: make([]byte, 256<<10)}}})
	}
	b.Requests = append(b.Requests, pb.Message{Type: pb.Heartbeat, ShardID: 2, From: 1, To: 2, Term: 9},
		pb.Message{Type: pb.RequestVoteResp, ShardID: 3, From: 1, To: 2, Term: 10})
	if err := conn.SendMessageBatch(b); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 8)
	in.mu.Lock()
	defer in.mu.Unlock()
	if want := []uint64{9, 10, 1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(in.terms, want) {
		t.Fatalf("terms arrived as %v, want %v", in.terms, want)
	}
	if first := in.types[0]; len(first) < 2 || first[0] != pb.Heartbeat || first[1] != pb.RequestVoteResp {
		t.Fatalf("the first frame held %v, want the heartbeat and the vote first", first)
	}
	// A batch that fits in one frame keeps its order.
	in.terms = in.terms[:0]
	small := pb.MessageBatch{Requests: []pb.Message{b.Requests[0], b.Requests[8]}}
	in.mu.Unlock()
	if err := conn.SendMessageBatch(small); err != nil {
		t.Fatal(err)
	}
	in.waitTerm(t, 9)
	in.mu.Lock()
	if !slices.Equal(in.terms, []uint64{1, 9}) {
		t.Fatalf("a small batch arrived as terms %v, want 1, 9", in.terms)
	}
}
