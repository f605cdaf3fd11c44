//go:build !linux

package raftnet

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing: TCP_USER_TIMEOUT is Linux's. Elsewhere a
// connection whose peer stopped acknowledging is noticed by keep-alives
// once nothing is in flight, or by the write deadline.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
