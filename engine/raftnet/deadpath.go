package raftnet

import (
	"net"
	"syscall"
	"time"
)

// keepAlive is the TCP keep-alive schedule of a connection that is taken
// for dead after d: the first probe once it has been silent d/2, then one
// every d/4. The kernel counts these in whole seconds (rounded up), so
// below d = 4s the probes go out each second. Where TCP_USER_TIMEOUT is
// set (Linux) it decides when unanswered probes end the connection: d
// after the peer was last heard from; elsewhere Count probes do.
func keepAlive(d time.Duration) net.KeepAliveConfig {
	return net.KeepAliveConfig{Enable: true, Idle: d / 2, Interval: d / 4, Count: 2}
}

// dialer makes outgoing connections that are taken for dead after
// t.deadAfter without an acknowledgement.
func (t *Transport) dialer() *net.Dialer {
	return &net.Dialer{
		KeepAliveConfig: keepAlive(t.deadAfter),
		Control: func(_, _ string, c syscall.RawConn) error {
			return setUserTimeout(c, t.deadAfter)
		},
	}
}

// listenConfig makes the listener; the connections it accepts inherit
// the listening socket's TCP_USER_TIMEOUT (Linux copies a listener's TCP
// options to every socket it accepts) and get the same keep-alives.
func (t *Transport) listenConfig() *net.ListenConfig {
	return &net.ListenConfig{
		KeepAliveConfig: keepAlive(t.deadAfter),
		Control: func(_, _ string, c syscall.RawConn) error {
			return setUserTimeout(c, t.deadAfter)
		},
	}
}
