package manager

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"shoal/agent"
	"shoal/api/client"
	"shoal/internal/clock"
	"shoal/security"
	"shoal/wire"
)

// Raft runs over mutual TLS: two replicas with certificates of one CA
// form a quorum (startSecure waits for it and registers both), two with
// certificates of different clusters never do.
func TestRaftRefusesAnotherCA(t *testing.T) {
	if testing.Short() {
		t.Skip("two pairs of replicas")
	}
	startSecure(t, secureOpts{n: 2})
	c := startSecure(t, secureOpts{n: 2, cas: []*security.CA{newTestCA(t), newTestCA(t)}, noWait: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := c.ms[0].E.WaitReady(ctx); err == nil {
		t.Fatal("replicas with certificates of two CAs formed a quorum")
	}
}

// Certificate renewal under load: an agent whose certificates live 3s
// renews them (at 50-80% of their lifetime) while its tasks are scaled up
// and down, on one session: no renewal drops it, every renewed certificate
// is used, and the tasks converge.
func TestRenewalUnderLoadKeepsTheSession(t *testing.T) {
	c := startSecure(t, secureOpts{n: 1, workerLifetime: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.admin(1)
	node, ac, creds := c.joinWorker(ctx, 1, "renewing")
	actx, stop := context.WithCancel(ctx)
	defer stop()
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agent.Run(actx, agent.Config{Manager: ac, Executor: agent.NewSimExecutor(clock.Real{}, agent.SimConfig{Seed: 1}),
			Store: agent.NewMemStore(), Node: wire.NodeDescription{Hostname: "renewing", CPU: 64000, Memory: 1 << 40}, Seed: 1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	var renewed atomic.Int32
	renewDone := make(chan error, 1)
	go func() {
		r := &client.Renewer{Client: ac, Creds: creds, Seed: 7, Save: func(_, _ []byte) error { return nil },
			OnNew: func(time.Time, time.Time) { renewed.Add(1) }}
		renewDone <- r.Run(actx)
	}()
	if _, _, err := admin.CreateService(ctx, client.ServiceSpec{Name: "load", Replicas: u32(20), Command: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	running := func(want int) func() (bool, string) {
		return func() (bool, string) {
			svc, _, err := admin.Service(ctx, "load", nil)
			if err != nil {
				return false, err.Error()
			}
			return svc.Running == want && svc.Desired == want, fmt.Sprintf("%d/%d running, %d renewals", svc.Running, svc.Desired, renewed.Load())
		}
	}
	for i, n := range []int{40, 10, 30, 20} {
		if _, _, err := admin.Scale(ctx, "load", uint32(n)); err != nil {
			t.Fatalf("scale %d: %v", i, err)
		}
		eventually(t, 30*time.Second, running(n))
	}
	eventually(t, 30*time.Second, func() (bool, string) { return renewed.Load() >= 4, fmt.Sprint(renewed.Load(), " renewals") })
	eventually(t, 30*time.Second, running(20))
	if got := c.metric(1, "shoal_agent_sessions_total"); got != "1" {
		t.Fatalf("sessions opened = %s over %d renewals, want 1 (a renewal dropped the session)", got, renewed.Load())
	}
	if n, err := admin.Node(ctx, strconv.FormatUint(node, 10)); err != nil || n.Status != "ready" {
		t.Fatalf("node after renewals: %+v %v", n, err)
	}
	if cur := creds.Cert(); time.Until(cur.Leaf.NotAfter) <= 0 {
		t.Fatal("the agent holds an expired certificate")
	}
	stop()
	if err := <-agentDone; err != nil {
		t.Fatalf("agent: %v", err)
	}
	<-renewDone
}
