package raftnet

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// msgConn is one of dragonboat's stream connections to a peer. It is used
// by one goroutine at a time (dragonboat's sender for that stream); its
// watcher only closes gone.
type msgConn struct {
	t      *Transport
	target string
	c      net.Conn
	gone   chan struct{} // closed when the peer closed or reset c
	buf    []byte
	order  []pb.Message // SendMessageBatch's reordered messages
	// refused is when the last dial was refused (zero after one that
	// connected): the peer's host is up and nothing listens, a restart.
	refused time.Time
}

var _ raftio.IConnection = (*msgConn)(nil)

// dial replaces the connection with a fresh one and starts its watcher.
func (m *msgConn) dial(ctx context.Context) error {
	if m.c != nil {
		_ = m.c.Close()
		m.c = nil
	}
	c, err := m.t.dial(ctx, m.target, kindMessages)
	if err != nil {
		if isRefused(err) {
			m.refused = time.Now()
			m.t.refusedBy(m.target)
		}
		return err
	}
	m.refused = time.Time{}
	m.t.reached(m.target)
	gone := make(chan struct{})
	go func() {
		// The receiver never writes on a message connection: a read
		// returns when the peer closed or reset it, when the kernel
		// ended it (DeadAfter without an acknowledgement), or when Close
		// did.
		_, err := io.Copy(io.Discard, c)
		close(gone)
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			m.t.probe(m.target)
		}
	}()
	m.c, m.gone = c, gone
	return nil
}

// SendMessageBatch sends one batch, in frames of at most frameBudget
// bytes of messages each (a message bigger than that goes alone), in
// order: the receiver hands each frame to Raft as it arrives, and neither
// side holds a buffer the size of the whole batch (dragonboat makes
// batches of up to 64 MiB when messages queue up behind a slow peer). On
// a connection its peer already closed, or the kernel ended
// (Factory.DeadAfter), it dials first; when a frame's write fails or
// times out it dials once more and sends that frame again (Raft tolerates
// a message delivered twice); when that fails too the connection is
// closed, the rest of the batch is not sent and the next send dials.
//
// A peer whose host refuses the connection is restarting: the batch is
// dropped without an error (Raft tolerates lost messages) and a later
// send dials again, at most once per redialGap. An error would trip
// dragonboat's circuit breaker for the peer, which then drops every
// message to it for half a second to a second after it is back — long
// enough to stall a group whose quorum needs it. Any other failure (a
// host that does not answer) is an error, and dragonboat reports the peer
// unreachable and backs off.
func (m *msgConn) SendMessageBatch(b pb.MessageBatch) error {
	if m.c == nil || isClosed(m.gone) {
		if m.c == nil && !m.refused.IsZero() && time.Since(m.refused) < redialGap {
			return nil
		}
		if err := m.dial(context.Background()); err != nil {
			if isRefused(err) {
				return nil
			}
			return err
		}
	}
	if m.t.sent != nil {
		m.t.sent(&b)
	}
	all := m.controlFirst(b.Requests)
	defer clear(m.order) // drop references to entries
	for first := true; first || len(all) > 0; first = false {
		n, size := 0, 0
		for n < len(all) && (n == 0 || size+all[n].SizeUpperLimit() <= frameBudget) {
			size += all[n].SizeUpperLimit()
			n++
		}
		part := b
		part.Requests = all[:n]
		all = all[n:]
		if err := m.sendFrame(&part); err != nil {
			if errors.Is(err, errDropped) {
				return nil
			}
			return err
		}
	}
	return nil
}

// controlFirst returns msgs as they are when they fit in one frame, else
// with the control messages (heartbeats, votes, answers: no entries, not
// Replicate) ahead of the others, each kind in its order: a heartbeat
// queued behind megabytes of entries reaches its follower in the first
// frame instead of after them. Raft is indifferent to the order messages
// arrive in (a heartbeat's commit index never exceeds what the follower
// acknowledged), and Replicate messages keep theirs. The result may live
// in m.order.
func (m *msgConn) controlFirst(msgs []pb.Message) []pb.Message {
	size, replicate, late := 0, false, false
	for i := range msgs {
		size += msgs[i].SizeUpperLimit()
		if !control(&msgs[i]) {
			replicate = true
		} else if replicate {
			late = true // behind entries
		}
	}
	if size <= frameBudget || !late {
		return msgs
	}
	m.order = m.order[:0]
	for i := range msgs {
		if control(&msgs[i]) {
			m.order = append(m.order, msgs[i])
		}
	}
	for i := range msgs {
		if !control(&msgs[i]) {
			m.order = append(m.order, msgs[i])
		}
	}
	return m.order
}

// control reports whether m is neither a Replicate message nor carries
// entries (a follower forwards proposals with theirs).
func control(m *pb.Message) bool { return m.Type != pb.Replicate && len(m.Entries) == 0 }

// errDropped is a frame not sent because the peer refused the connection
// dialled to send it again.
var errDropped = errors.New("peer refused the connection")

// sendFrame writes one frame of b, dialling once more if the write fails.
func (m *msgConn) sendFrame(b *pb.MessageBatch) error {
	need := headerSize + b.SizeUpperLimit()
	if cap(m.buf) < need {
		m.buf = make([]byte, need)
	}
	payload := pb.MustMarshalTo(b, m.buf[headerSize:need])
	frame := m.buf[:headerSize+len(payload)]
	if cap(m.buf) > keepBuffer {
		m.buf = nil
	}
	err := writeFrame(m.c, frame, ioTimeout)
	if err == nil {
		return nil
	}
	if derr := m.dial(context.Background()); derr != nil {
		if isRefused(derr) {
			return errDropped
		}
		return errors.Join(err, derr)
	}
	if err := writeFrame(m.c, frame, ioTimeout); err != nil {
		// The frame may be half written, so nothing may follow it here:
		// the next send dials a fresh connection.
		m.Close()
		m.c = nil
		return err
	}
	return nil
}

// isRefused reports whether a dial failed because nothing listens at the
// address.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// Close closes the connection; its watcher returns.
func (m *msgConn) Close() {
	if m.c != nil {
		_ = m.c.Close()
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// snapConn carries one snapshot's chunks.
type snapConn struct {
	c      net.Conn
	failed bool // a chunk's write failed: c is closed
}

var _ raftio.ISnapshotConnection = (*snapConn)(nil)

// SendChunk sends one chunk. When the write fails or times out the
// connection is closed (the chunk may be half written) and the snapshot
// has failed.
func (s *snapConn) SendChunk(ch pb.Chunk) error {
	if s.failed {
		return errSnapshotFailed
	}
	buf := make([]byte, headerSize+ch.Size())
	payload := pb.MustMarshalTo(&ch, buf[headerSize:])
	if err := writeFrame(s.c, buf[:headerSize+len(payload)], ioTimeout); err != nil {
		s.failed = true
		_ = s.c.Close()
		return err
	}
	return nil
}

// Close ends the snapshot with an empty frame and waits (bounded) for the
// receiver's acknowledgement that it handled every chunk, then closes;
// after a failed chunk it only closes.
func (s *snapConn) Close() {
	if s.failed {
		return
	}
	defer func() { _ = s.c.Close() }()
	if writeFrame(s.c, make([]byte, headerSize), ioTimeout) != nil {
		return
	}
	_ = s.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var ack [1]byte
	_, _ = io.ReadFull(s.c, ack[:])
}
