package manager

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/engine"
	"shoal/route"
	"shoal/statemachine"
)

// The task history limit set through a follower's API reaches every group
// of every replica; out-of-range values are refused naming the field, and
// status shows the setting and the answering replica's monitor timers.
func TestClusterSettingsThroughTheAPI(t *testing.T) {
	c := startThree(t)
	ctx := ctxT(t)
	id := c.leaderOf(route.ClusterGroup)%3 + 1 // not the cluster group's leader
	cl := c.client(id)
	for _, bad := range []int{0, 101} {
		if _, err := cl.UpdateClusterSettings(ctx, client.ClusterSettingsUpdate{TaskHistoryLimit: &bad}); !isCode(err, client.CodeInvalidSpec, 422) {
			t.Errorf("limit %d: %v, want 422 %s", bad, err, client.CodeInvalidSpec)
		}
	}
	limit := 2
	got, err := cl.UpdateClusterSettings(ctx, client.ClusterSettingsUpdate{TaskHistoryLimit: &limit})
	if err != nil || got.TaskHistoryLimit != 2 {
		t.Fatalf("update: %+v, %v", got, err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, m := range c.ms {
			for g := 0; g <= m.E.Groups(); g++ {
				var l int
				if err := m.E.ReadLocal(g, func(s *statemachine.State) { l = s.Settings().TaskHistoryLimit }); err != nil || l != 2 {
					return false, fmt.Sprintf("replica %d group %d has limit %d (%v)", m.E.ReplicaID(), g, l, err)
				}
			}
		}
		return true, ""
	})
	st, err := c.client(id%3 + 1).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Settings.TaskHistoryLimit != 2 || st.Monitor.FailoverGrace != client.Duration(30*time.Second) ||
		st.Monitor.OrphanTimeout != client.Duration(24*time.Hour) {
		t.Fatalf("status shows settings %+v and timers %+v; want limit 2 and the defaults 30s and 24h", st.Settings, st.Monitor)
	}
}

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
