package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/agent"
	"shoal/api/client"
	"shoal/internal/clock"
	"shoal/security"
	sm "shoal/statemachine"
	"shoal/wire"
)

// idleManagerEnv names the directory of the idle manager's credentials in
// the child process that runs it (TestIdleManagerProcess).
const idleManagerEnv = "SHOAL_IDLE_MANAGER_DIR"

// The idle manager's answers: the heartbeat period and sync interval a
// loadgen's managers give 1,000 agents (a heartbeat about every second,
// a sync every 5 s ±50 %), and the agent's default poll wait.
const (
	idlePeriod = time.Second
	idleSync   = 5 * time.Second
)

// BenchmarkIdleAgents is the cost of idle agents to the process that runs
// them: N agents — the real runner (agent.Agent: its heartbeat, sync,
// status and assignments loops), the simulated executor, and each agent's
// own mutual-TLS client (client.AgentHTTPS, as the fleet and a real agent
// make it) — against a manager that answers at once (heartbeats, syncs)
// or holds the poll for its wait, as an idle cluster does. The manager
// runs in a child process, so the CPU counted (getrusage of this process)
// is the agents' only. One op is one second of wall time once every agent
// holds a session and has made its first calls; reported: CPU-µs per
// agent-second and per heartbeat, heartbeats per agent-second (the calls
// must not fall), the process's voluntary context switches per agent-second
// (its threads put to sleep and woken: timers firing, connections turning
// readable), the heap objects allocated per heartbeat (with everything
// else the agents did meanwhile), and the handshakes the agents' dialers started in the
// window (an idle agent's connections are kept).
func BenchmarkIdleAgents(b *testing.B) {
	for _, n := range []int{200} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchIdleAgents(b, n) })
	}
}

func benchIdleAgents(b *testing.B, n int) {
	addr, creds := startIdleManager(b)
	ctx, cancel := context.WithCancel(context.Background())
	var beats atomic.Int64
	var clients []*client.AgentClient
	done := make(chan struct{}, n)
	for i := range n {
		hc := client.AgentHTTPS(creds.TLS(), 90*24*time.Hour)
		ac, err := client.NewAgentClient([]string{addr}, hc)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, ac)
		ag, err := agent.New(agent.Config{Manager: &countingManager{AgentClient: ac, beats: &beats},
			Executor: agent.NewSimExecutor(clock.Real{}, agent.SimConfig{Seed: uint64(i + 1)}), Store: agent.NewMemStore(),
			Logger: slog.New(slog.DiscardHandler), Seed: uint64(i + 1), Node: wire.NodeDescription{Hostname: fmt.Sprintf("idle-%04d", i), CPU: 64_000, Memory: 256 << 30}})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			_ = ag.Run(ctx)
			done <- struct{}{}
		}()
	}
	b.Cleanup(func() {
		cancel()
		for range n {
			<-done
		}
		for _, ac := range clients {
			ac.CloseIdleConnections()
		}
	})
	// Every agent beats and polls within a few periods; then its first
	// sync and the long polls' first renewals settle.
	deadline := time.Now().Add(30 * time.Second)
	for beats.Load() < int64(3*n) {
		if time.Now().After(deadline) {
			b.Fatalf("only %d heartbeats from %d agents in 30s", beats.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * idleSync)
	dials := client.Dials.Started.Load()
	cpu, sw, al, beat0, start := cpuNow(), switches(), allocs(), beats.Load(), time.Now()
	for b.Loop() {
		time.Sleep(time.Second)
	}
	used, wall, hb, sws, als := cpuNow()-cpu, time.Since(start), beats.Load()-beat0, switches()-sw, allocs()-al
	agentSeconds := float64(n) * wall.Seconds()
	b.ReportMetric(float64(used.Microseconds())/agentSeconds, "cpu-µs/agent-s")
	b.ReportMetric(float64(used.Microseconds())/float64(max(hb, 1)), "cpu-µs/heartbeat")
	b.ReportMetric(float64(hb)/agentSeconds, "beats/agent-s")
	b.ReportMetric(float64(sws)/agentSeconds, "vcsw/agent-s")
	b.ReportMetric(float64(als)/float64(max(hb, 1)), "allocs/heartbeat")
	b.ReportMetric(float64(client.Dials.Started.Load()-dials), "dials")
}

// switches is the voluntary context switches of this process's threads
// so far: a thread that went to sleep and was woken again, as the Go
// runtime's are when a timer fires or a connection turns readable in an
// otherwise idle process (the involuntary ones follow the machine's load).
func switches() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Nvcsw
}

// allocs is the heap objects this process allocated so far.
func allocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// countingManager counts an agent's heartbeats that were answered.
type countingManager struct {
	*client.AgentClient
	beats *atomic.Int64
}

func (m *countingManager) Heartbeat(ctx context.Context, hb *wire.Heartbeat) (*wire.HeartbeatAck, error) {
	a, err := m.AgentClient.Heartbeat(ctx, hb)
	if err == nil {
		m.beats.Add(1)
	}
	return a, err
}

// startIdleManager starts the idle manager in a child process (this test
// binary, running TestIdleManagerProcess) and returns its address and the
// agents' credentials. The child ends when its stdin closes.
func startIdleManager(b *testing.B) (string, *client.Credentials) {
	b.Helper()
	dir := b.TempDir()
	now := time.Now()
	ca, err := security.NewCA(rand.Reader, now.Add(-time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	issue := func(role security.Role, name string) ([]byte, []byte, *tls.Certificate) {
		k, err := security.NewKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		ders, err := ca.Issue(rand.Reader, security.Request{Role: role, Name: name, Key: &k.PublicKey, Hosts: []string{"127.0.0.1"}}, now.Add(-time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		kp, err := security.KeyPEM(k)
		if err != nil {
			b.Fatal(err)
		}
		return security.CertPEM(ders...), kp, &tls.Certificate{Certificate: ders, PrivateKey: k}
	}
	srvCert, srvKey, _ := issue(security.RoleManager, "1")
	_, _, worker := issue(security.RoleWorker, "7")
	for name, data := range map[string][]byte{"ca.crt": security.CertPEM(ca.Root.Raw), "srv.crt": srvCert, "srv.key": srvKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleManagerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), idleManagerEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if a, err := os.ReadFile(filepath.Join(dir, "addr")); err == nil && len(a) > 0 && a[len(a)-1] == '\n' {
			return strings.TrimSpace(string(a)), client.NewCredentials(ca.Root, worker)
		}
		if time.Now().After(deadline) {
			b.Fatalf("the idle manager did not start: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIdleManagerProcess is the idle manager of BenchmarkIdleAgents, run
// in a child process; in a test run of its own it does nothing.
func TestIdleManagerProcess(t *testing.T) {
	dir := os.Getenv(idleManagerEnv)
	if dir == "" {
		t.Skip("the idle manager of BenchmarkIdleAgents (runs in its child process)")
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	roots, err := security.ParseCerts(read("ca.crt"))
	if err != nil || len(roots) == 0 {
		t.Fatal("no CA", err)
	}
	pair, err := security.KeyPair(read("srv.crt"), read("srv.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(roots[0])
	cfg := security.ServerTLS(func() *tls.Certificate { return &pair }, pool)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &idleManager{}
	srv := &fasthttp.Server{Handler: m.handle, ReadTimeout: 6 * time.Minute, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	if err := os.WriteFile(filepath.Join(dir, "addr"), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
	_ = srv.Shutdown()
}

// idleManager answers the agent protocol for idle nodes: a session per
// request, heartbeats and syncs at once, a status batch accepted, and an
// assignments poll held for its wait (answered at once when the agent has
// no cursor yet) with nothing new.
type idleManager struct {
	nodes, sessions atomic.Uint64
}

func (m *idleManager) handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	body := ctx.PostBody()
	var ans wire.Message
	switch {
	case strings.HasSuffix(path, "/session"):
		req := &wire.SessionRequest{}
		if m.decode(ctx, body, req) {
			node := req.NodeID
			if node == 0 {
				node = sm.NodeID(m.nodes.Add(1))
			}
			ans = &wire.Session{NodeID: node, SessionID: m.sessions.Add(1), HeartbeatPeriod: int64(idlePeriod),
				SyncInterval: int64(idleSync), Groups: 1}
		}
	case strings.HasSuffix(path, "/heartbeat"):
		ans = &wire.HeartbeatAck{Period: int64(idlePeriod), Status: sm.NodeReady}
	case strings.HasSuffix(path, "/assignments"):
		req := &wire.AssignmentsRequest{}
		if m.decode(ctx, body, req) {
			if req.Cursor == nil {
				ans = &wire.Assignments{Kind: wire.FrameComplete, Last: true, ResultsIn: wire.Cursor{1}}
			} else {
				time.Sleep(time.Duration(req.Wait))
				ans = &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: req.Cursor, ResultsIn: req.Cursor}
			}
		}
	case strings.HasSuffix(path, "/status"):
		req := &wire.StatusBatch{}
		if m.decode(ctx, body, req) {
			ack := &wire.StatusAck{Results: make([]wire.ReportResult, len(req.Reports))}
			for i := range ack.Results {
				ack.Results[i] = wire.ReportAccepted
			}
			ans = ack
		}
	case strings.HasSuffix(path, "/sync"):
		ans = &wire.SyncAnswer{}
	default:
		ctx.Error("no such call", fasthttp.StatusNotFound)
		return
	}
	if ans == nil {
		return
	}
	out, err := wire.Append(nil, ans)
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/x-shoal-wire")
	ctx.SetBody(out)
}

func (m *idleManager) decode(ctx *fasthttp.RequestCtx, body []byte, msg wire.Message) bool {
	if err := wire.DecodeInto(body, msg); err != nil {
		ctx.Error(err.Error(), fasthttp.StatusBadRequest)
		return false
	}
	return true
}
