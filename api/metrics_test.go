package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/cluster"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// Each request's count and duration land under its endpoint and status.
func TestObserveCountsByEndpointAndStatus(t *testing.T) {
	m := newMetrics(&Server{})
	for range 3 {
		m.observe("agent_heartbeat", 200, time.Millisecond)
	}
	m.observe("agent_heartbeat", 503, time.Millisecond)
	var b bytes.Buffer
	m.set.WritePrometheus(&b)
	out := b.String()
	for _, want := range []string{
		`shoal_http_requests_total{endpoint="agent_heartbeat",code="200"} 3`,
		`shoal_http_requests_total{endpoint="agent_heartbeat",code="503"} 1`,
		`shoal_http_request_duration_seconds_count{endpoint="agent_heartbeat"} 4`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
}

// BenchmarkObserve counts requests from every core at once, as a manager's
// request goroutines do.
func BenchmarkObserve(b *testing.B) {
	m := newMetrics(&Server{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.observe("agent_assignments", 200, time.Millisecond)
		}
	})
}

// metricValue returns the value of the sample named name in the set's
// exposition, -1 if absent.
func metricValue(t *testing.T, m *metrics, name string) float64 {
	t.Helper()
	var b bytes.Buffer
	m.set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// The live heap gauge follows what the last collection found live: 64 MiB
// kept shows in it, and leaves it once dropped and collected.
func TestHeapLiveFollowsTheLastCollection(t *testing.T) {
	m := newMetrics(&Server{})
	kept := make([]byte, 64<<20)
	for i := range kept {
		kept[i] = byte(i)
	}
	runtime.GC()
	with := metricValue(t, m, "go_gc_heap_live_bytes")
	runtime.KeepAlive(kept)
	kept = nil
	runtime.GC()
	without := metricValue(t, m, "go_gc_heap_live_bytes")
	if with < 64<<20 || with-without < 48<<20 {
		t.Fatalf("live heap %.0f B with 64 MiB kept, %.0f B after it was dropped", with, without)
	}
}

// Each handshake counts once, under resumed, full or failed.
func TestObserveHandshakeCountsByOutcome(t *testing.T) {
	s := &Server{}
	s.metrics = newMetrics(s)
	s.ObserveHandshake(Handshake{Took: time.Millisecond, Resumed: true})
	s.ObserveHandshake(Handshake{Took: time.Millisecond, Resumed: true})
	s.ObserveHandshake(Handshake{Took: time.Millisecond})
	s.ObserveHandshake(Handshake{Wait: time.Second, Err: errHandshakeWait})
	s.ObserveHandshake(Handshake{Took: time.Second, Err: fmt.Errorf("read: %w", os.ErrDeadlineExceeded)})
	s.ObserveHandshake(Handshake{Took: time.Second, Err: fmt.Errorf("read: %w", os.ErrDeadlineExceeded), Hello: true})
	s.ObserveHandshake(Handshake{Took: time.Second, Err: io.EOF, Hello: true})
	s.ObserveHandshake(Handshake{Took: time.Second, Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}, Hello: true})
	s.ObserveHandshake(Handshake{Took: time.Second, Err: errors.New("tls: bad certificate"), Hello: true})
	for name, want := range map[string]float64{
		`shoal_tls_handshakes_total{resumed="true"}`:           2,
		`shoal_tls_handshakes_total{resumed="false"}`:          1,
		`shoal_tls_handshakes_failed_total{reason="turn"}`:     1,
		`shoal_tls_handshakes_failed_total{reason="no_hello"}`: 1,
		`shoal_tls_handshakes_failed_total{reason="slow"}`:     1,
		`shoal_tls_handshakes_failed_total{reason="closed"}`:   2,
		`shoal_tls_handshakes_failed_total{reason="refused"}`:  1,
		`shoal_tls_handshake_wait_seconds_count`:               9,
		`shoal_tls_handshake_seconds_count`:                    8,
	} {
		if got := metricValue(t, s.metrics, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A route's requests are counted in the same series observe counts in,
// by status (a route keeps its 200 counter and its histogram); a status
// a route never answered has no series.
func TestRouteRequestsCounted(t *testing.T) {
	st := statemachine.New(statemachine.Config{})
	for _, c := range []struct {
		mon  beats
		code int
	}{{beats{ttl: time.Second}, 200}, {beats{err: fmt.Errorf("x: %w", cluster.ErrNotProposed)}, 503}} {
		r := &replica{st: st, leader: 1}
		s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
			Feed: control.NewFeed(1, nil, 16, 16), Monitor: c.mon})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			postAgent(t, s, "/v1/agent/heartbeat", &wire.Heartbeat{NodeID: 5})
		}
		var b bytes.Buffer
		s.metrics.set.WritePrometheus(&b)
		out := b.String()
		want := fmt.Sprintf(`shoal_http_requests_total{endpoint="agent_heartbeat",code="%d"} 3`, c.code)
		if !strings.Contains(out, want+"\n") {
			t.Errorf("status %d: no line %q in\n%s", c.code, want, out)
		}
		if c.code != 200 && strings.Contains(out, `shoal_http_requests_total{endpoint="agent_heartbeat",code="200"}`) {
			t.Errorf("a series for status 200, which no request got")
		}
		if !strings.Contains(out, `shoal_http_request_duration_seconds_count{endpoint="agent_heartbeat"} 3`+"\n") {
			t.Errorf("status %d: the duration histogram does not count 3 requests:\n%s", c.code, out)
		}
		s.Close()
	}
}
