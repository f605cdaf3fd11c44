package api

import (
	"bytes"
	"strings"
	"testing"
	"time"
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
