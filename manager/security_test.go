package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"shoal/agent"
	"shoal/api/client"
	"shoal/internal/clock"
	"shoal/security"
	"shoal/statemachine"
	"shoal/wire"
)

func wireCode(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

// Joins over real TLS on loopback: a good token gets a certificate naming
// the node the cluster created; a mistyped secret, another cluster's
// token, a rotated-out token and the worker token used by a manager are
// refused with a message naming the problem; repeated failures are
// rate-limited; the user API needs an admin certificate.
func TestJoinTokensOverTLS(t *testing.T) {
	c := startSecure(t, secureOpts{n: 1})
	ctx := ctxT(t)
	addrs := []string{c.addr(1)}
	worker := c.token(security.RoleWorker)
	nodeReq := client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: "n1"}}

	j, err := client.Join(ctx, addrs, worker, nodeReq)
	if err != nil {
		t.Fatalf("join with the worker token: %v", err)
	}
	certs, err := security.ParseCerts([]byte(j.Answer.Cert))
	if err != nil || certs[0].Subject.CommonName != strconv.FormatUint(j.Answer.NodeID, 10) ||
		certs[0].Subject.OrganizationalUnit[0] != "worker" || certs[0].Subject.Organization[0] != c.cas[0].ClusterID {
		t.Fatalf("certificate subject %v for node %d (%v)", certs[0].Subject, j.Answer.NodeID, err)
	}
	if n, err := c.admin(1).Node(ctx, strconv.FormatUint(j.Answer.NodeID, 10)); err != nil || n.Name != "n1" {
		t.Fatalf("the joined node is not in the cluster: %+v %v", n, err)
	}

	refused := func(name, token string, req client.JoinRequest, want string) {
		t.Helper()
		_, err := client.Join(ctx, addrs, token, req)
		if !errors.Is(err, client.ErrJoinRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: got %v, want a refusal saying %q", name, err, want)
		}
		for _, sec := range []security.Secret{c.tokens.Secrets().Worker, c.tokens.Secrets().Manager} {
			if strings.Contains(err.Error(), sec.Text()) {
				t.Fatalf("%s: the refusal repeats a secret: %v", name, err)
			}
		}
	}
	wrong := security.Token{Digest: c.cas[0].Digest(), Secret: security.Secret{1, 2, 3}}.String()
	refused("wrong secret", wrong, nodeReq, "does not match a current token")
	other := security.Token{Digest: newTestCA(t).Digest(), Secret: c.tokens.Secrets().Worker}.String()
	refused("another cluster's token", other, nodeReq, "does not match the join token's CA digest")
	refused("malformed token", "SHOAL-1-abc", nodeReq, "malformed")
	refused("manager with the worker token", worker,
		client.JoinRequest{Role: "manager", Replica: 4, RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"},
		"a manager joins with the manager token")

	rot, err := c.admin(1).RotateToken(ctx, "worker")
	if err != nil || rot.Token == worker || !strings.HasPrefix(rot.Token, "SHOAL-1-"+c.cas[0].Digest().String()) {
		t.Fatalf("rotate: %+v %v", rot, err)
	}
	refused("rotated-out token", worker, nodeReq, "rotated")
	if _, err := client.Join(ctx, addrs, rot.Token, nodeReq); err != nil {
		t.Fatalf("join with the rotated token: %v", err)
	}
	// The first node's certificate stays good after the rotation.
	kp, _ := security.KeyPEM(j.Key)
	pair, err := security.KeyPair([]byte(j.Answer.Cert), kp)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := client.NewAgentClient(addrs, client.SharedHTTPS(4, client.NewCredentials(c.cas[0].Root, &pair).TLS(), 0))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ac.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "n1"}}); err != nil || uint64(s.NodeID) != j.Answer.NodeID {
		t.Fatalf("session of the node joined before the rotation: %+v %v", s, err)
	}

	t.Run("user API needs an admin certificate", func(t *testing.T) {
		for _, cfg := range []struct {
			name string
			tls  *tls.Config
			want int
		}{
			{"no certificate", client.NewCredentials(c.cas[0].Root, nil).TLS(), http.StatusUnauthorized},
			{"worker certificate", client.NewCredentials(c.cas[0].Root, &pair).TLS(), http.StatusForbidden},
		} {
			cl, _ := client.NewTLS(c.addr(1), cfg.tls)
			_, _, err := cl.Services(ctx, nil)
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != cfg.want {
				t.Errorf("%s: %v, want status %d", cfg.name, err, cfg.want)
			}
		}
		if _, _, err := c.admin(1).Services(ctx, nil); err != nil {
			t.Errorf("admin: %v", err)
		}
	})

	t.Run("failed joins are rate-limited", func(t *testing.T) {
		var err error
		for i := 0; i < 20; i++ {
			if _, err = client.Join(ctx, addrs, wrong, nodeReq); strings.Contains(errString(err), "too many failed join attempts") {
				break
			}
		}
		if !strings.Contains(errString(err), "too many failed join attempts") {
			t.Fatalf("20 failed joins were never limited: %v", err)
		}
	})
}

// An agent acts only for the node its certificate names: reporting another
// node's task or heartbeating for it is refused with 403, counted, and
// changes nothing; once a node is removed, its certificate is refused. Three
// replicas: Raft runs over mutual TLS.
func TestAgentsActOnlyForThemselves(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas")
	}
	c := startSecure(t, secureOpts{n: 3, minHeartbeat: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.admin(1)
	a, ac, _ := c.joinWorker(ctx, 1, "a")
	b, bc, _ := c.joinWorker(ctx, 2, "b")
	sessA, err := ac.OpenSession(ctx, &wire.SessionRequest{NodeID: statemachine.NodeID(a), Node: wire.NodeDescription{Hostname: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	sessB, err := bc.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: "b"}})
	if err != nil || uint64(sessB.NodeID) != b {
		t.Fatalf("B's session: %+v %v (the node ID comes from the certificate)", sessB, err)
	}
	if _, err := ac.OpenSession(ctx, &wire.SessionRequest{NodeID: statemachine.NodeID(b), Node: wire.NodeDescription{Hostname: "b"}}); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A opened a session as B: %v", err)
	}
	drain := "drain"
	if _, err := admin.UpdateNode(ctx, strconv.FormatUint(a, 10), client.NodeUpdate{Availability: &drain}); err != nil {
		t.Fatal(err)
	}
	beat := func(cl *client.AgentClient, node uint64, sid uint64) error {
		_, err := cl.Heartbeat(ctx, &wire.Heartbeat{NodeID: statemachine.NodeID(node), SessionID: sid})
		return err
	}
	if err := beat(ac, a, sessA.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := beat(bc, b, sessB.SessionID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(1), Command: []string{"sleep", "1"},
		Restart: &client.RestartPolicy{Condition: "none"}}); err != nil {
		t.Fatal(err)
	}
	var task client.Task
	eventually(t, 20*time.Second, func() (bool, string) {
		_ = beat(bc, b, sessB.SessionID)
		l, _, err := admin.Tasks(ctx, nil)
		if err != nil || len(l.Items) != 1 {
			return false, errString(err)
		}
		task = l.Items[0]
		return task.State == "assigned" && uint64(task.Node) == b, task.State
	})
	id, _ := strconv.ParseUint(task.ID, 10, 64)
	report := &wire.StatusBatch{NodeID: statemachine.NodeID(a), SessionID: sessA.SessionID,
		Reports: []wire.StatusReport{{Task: statemachine.TaskID(id), State: statemachine.StateRunning}}}
	if _, err := ac.ReportStatus(ctx, report); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A reported B's task: %v, want forbidden", err)
	}
	report.NodeID = statemachine.NodeID(b)
	if _, err := ac.ReportStatus(ctx, report); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A reported B's task naming B in the body: %v, want forbidden", err)
	}
	if err := beat(ac, b, sessA.SessionID); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A heartbeat for B: %v, want forbidden", err)
	}
	if _, err := ac.Sync(ctx, &wire.SyncRequest{NodeID: statemachine.NodeID(b)}); wireCode(err) != wire.CodeForbidden {
		t.Fatalf("A synced for B: %v, want forbidden", err)
	}
	if got, _ := admin.Task(ctx, task.ID); got.State != "assigned" {
		t.Fatalf("refused reports changed the task: %s", got.State)
	}
	var denied int
	for id := uint64(1); id <= 3; id++ {
		n, _ := strconv.Atoi(c.metric(id, `shoal_auth_denied_total{reason="other_node"}`))
		denied += n
	}
	if denied < 4 {
		t.Fatalf("shoal_auth_denied_total{reason=\"other_node\"} = %d over the replicas, want at least 4", denied)
	}
	// B's own reports go through (its task runs, then completes).
	report.SessionID = sessB.SessionID
	for _, st := range []statemachine.TaskState{statemachine.StateRunning, statemachine.StateComplete} {
		report.Reports[0].State = st
		if ack, err := bc.ReportStatus(ctx, report); err != nil || ack.Results[0] != wire.ReportAccepted {
			t.Fatalf("B's own report %s: %+v %v", st, ack, err)
		}
	}

	// B goes silent, is marked down and removed: its certificate is
	// refused from then on, on every endpoint.
	eventually(t, 30*time.Second, func() (bool, string) {
		n, err := admin.Node(ctx, strconv.FormatUint(b, 10))
		return err == nil && n.Status == "down", n.Status + errString(err)
	})
	if err := admin.RemoveNode(ctx, strconv.FormatUint(b, 10)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		err := beat(bc, b, sessB.SessionID)
		return wireCode(err) == wire.CodeNodeRemoved, errString(err)
	})
	if _, err := bc.Assignments(ctx, &wire.AssignmentsRequest{NodeID: statemachine.NodeID(b)}); wireCode(err) != wire.CodeNodeRemoved {
		t.Fatalf("the removed node read its assignments: %v", err)
	}
	if _, _, err := bc.Renew(ctx); wireCode(err) != wire.CodeNodeRemoved {
		t.Fatalf("the removed node renewed its certificate: %v", err)
	}
}

// Raft refuses a peer whose certificate comes from another CA: two
// replicas with certificates of different clusters never form a quorum.
func TestRaftRefusesAnotherCA(t *testing.T) {
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
