package raftnet

import (
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT from linux/tcp.h (18 on every
// architecture); the syscall package defines it on only some of them.
const tcpUserTimeout = 0x12

// setUserTimeout sets the socket's TCP_USER_TIMEOUT to d: the kernel
// ends the connection (a read or write then fails with ETIMEDOUT) once
// data sent on it has gone unacknowledged for d — whether the peer is
// silent or keeps its receive window closed — and, with keep-alives on,
// once the peer has answered no probe for d.
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d/time.Millisecond))
	})
	if err != nil {
		return err
	}
	return serr
}
