package raftnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"
)

// kind is what a connection carries, named in its preamble.
type kind byte

const (
	kindMessages kind = 1
	kindSnapshot kind = 2
)

const (
	version    = 1
	headerSize = 8
	// maxFrame bounds a frame's payload: dragonboat's largest message
	// batch (64 MiB) with room for the one message that may overshoot it.
	maxFrame = 128 << 20
	// frameBudget is the most bytes of messages a message frame carries,
	// unless one message alone is bigger. Entries reach a follower in
	// messages of at most about 4 MiB (engine.MaxReplicateBytes), each
	// then a frame of its own.
	frameBudget = 1 << 20
	// keepBuffer is the largest read buffer a connection keeps between
	// frames; a bigger frame gets a buffer of its own.
	keepBuffer = 4 << 20
	// snapshotAck is the byte a receiver answers a snapshot's end frame
	// with.
	snapshotAck = 0xAC
)

var (
	magic     = [5]byte{'S', 'H', 'R', 'N', 'T'}
	castagnol = crc32.MakeTable(crc32.Castagnoli)

	errBadPreamble = errors.New("not a Shoal Raft connection of this version")
	errBadFrame    = errors.New("corrupt Raft frame")
	// errSnapshotFailed is a chunk sent after one whose write failed.
	errSnapshotFailed = errors.New("snapshot transfer failed: an earlier chunk could not be sent")
)

func preamble(k kind) []byte {
	return append(magic[:], version, byte(k), 0)
}

// readPreamble reads and checks a connection's preamble within d.
func readPreamble(c net.Conn, d time.Duration) (kind, error) {
	var p [headerSize]byte
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, p[:]); err != nil {
		return 0, err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return 0, err
	}
	if [5]byte(p[:5]) != magic || p[5] != version {
		return 0, errBadPreamble
	}
	switch k := kind(p[6]); k {
	case kindMessages, kindSnapshot:
		return k, nil
	default:
		return 0, errBadPreamble
	}
}

// writeFrame writes one frame (header and payload) in one call, within d.
// buf must have headerSize bytes free in front of the payload:
// buf[headerSize:] is the payload.
func writeFrame(c net.Conn, buf []byte, d time.Duration) error {
	payload := buf[headerSize:]
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[4:8], crc32.Checksum(payload, castagnol))
	if err := c.SetWriteDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	_, err := c.Write(buf)
	return err
}

// readFrame reads one frame's payload into buf (grown if too small) and
// returns it. It waits for a frame as long as it takes; once a header
// arrived, the payload must follow within d.
func readFrame(c net.Conn, buf []byte, d time.Duration) ([]byte, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	if n > maxFrame {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", errBadFrame, n, maxFrame)
	}
	if int(n) > cap(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, err
	}
	if crc32.Checksum(buf, castagnol) != binary.BigEndian.Uint32(h[4:8]) {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadFrame)
	}
	return buf, nil
}
