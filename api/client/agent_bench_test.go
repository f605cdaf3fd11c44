package client

import (
	"context"
	"syscall"
	"testing"
	"time"

	"shoal/wire"
)

// BenchmarkAgentCall is one heartbeat of an agent's client over mutual TLS
// to a manager that answers at once (both in this process, so the CPU per
// op is both sides'): what a call costs beside the manager's own work —
// the request's encoding, the HTTP exchange and its TLS records, the
// answer's decoding. The connection is set up before the timer starts, as
// an agent's is after its first call.
func BenchmarkAgentCall(b *testing.B) {
	m := newTLSManager(b, false)
	c, err := NewAgentClient([]string{m.addr}, AgentHTTPS(m.client, 0))
	if err != nil {
		b.Fatal(err)
	}
	hb := &wire.Heartbeat{NodeID: 7, SessionID: 42}
	beat := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Heartbeat(ctx, hb); err != nil {
			b.Fatal(err)
		}
	}
	beat()
	b.ReportAllocs()
	cpu := cpuNow()
	for b.Loop() {
		beat()
	}
	b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAgentPoll is BenchmarkAgentCall for an assignments poll the
// manager answers at once (nothing new): the poll runs on a goroutine of
// its own, so that the agent can give it up, and that goroutine's set-up
// and stack are part of its cost.
func BenchmarkAgentPoll(b *testing.B) {
	m := newTLSManager(b, false)
	c, err := NewAgentClient([]string{m.addr}, AgentHTTPS(m.client, 0))
	if err != nil {
		b.Fatal(err)
	}
	req := &wire.AssignmentsRequest{NodeID: 7, SessionID: 42}
	poll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Assignments(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	poll()
	b.ReportAllocs()
	cpu := cpuNow()
	for b.Loop() {
		poll()
	}
	b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuNow is the CPU time this process used so far (user and system),
// which a loaded machine stretches far less than wall time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
