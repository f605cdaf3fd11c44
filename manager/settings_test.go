package manager

import (
	"path/filepath"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/engine"
)

// The monitor timers given to Start are the ones the replica's monitor
// runs with (status reads them from it), and a bad pair is refused.
func TestMonitorTimersReachTheMonitor(t *testing.T) {
	o := Options{DataDir: filepath.Join(t.TempDir(), "1"), RaftLogLevel: "critical", APIAddr: "127.0.0.1:0",
		FailoverGrace: -1, OrphanTimeout: 20 * time.Second,
		Engine: engine.Config{RTT: 20 * time.Millisecond, HeartbeatRTT: 3, ElectionRTT: 40}}
	m, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Register(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(m.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Monitor.FailoverGrace != 0 || st.Monitor.OrphanTimeout != client.Duration(20*time.Second) {
		t.Fatalf("status shows timers %+v, want no failover grace and a 20s orphan timeout", st.Monitor)
	}
	bad := o
	bad.DataDir, bad.FailoverGrace = filepath.Join(t.TempDir(), "2"), 21*time.Second
	if m2, err := Start(bad); err == nil {
		m2.Close()
		t.Fatal("a failover grace past the orphan timeout was accepted")
	}
}
