package manager

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/security"
	"shoal/statemachine"
	"shoal/wire"
)

// The agent calls as a replica serves them, end to end: a one-replica
// manager with TLS (real Raft, the real node monitor, the API behind the
// guarded listener and the handshake turns, as `serve` builds it) in the
// benchmark's process, and a fleet of agents in a child process (this
// test binary again, TestAgentCallsFleet), each agent with its own worker
// certificate and keep-alive connections, as the loadgen's fleet. The
// figures are the serving process's own: CPU (getrusage: user + system)
// and heap allocations per call, so the clients' CPU is not in them.
//
//	go test -c -o /tmp/m.test ./manager/ && nice /tmp/m.test -test.run '^$' \
//	    -test.bench BenchmarkAgentCallsTLS -test.benchtime 20000x -test.count 5
//
// SHOAL_AGENTCALLS_AGENTS sets the fleet's size (default 1000) and
// SHOAL_AGENTCALLS_RATE the calls per second the fleet paces itself to
// (default 2000, a 10,000-agent cluster's heartbeat rate; 0: as fast as
// the server answers, every agent with a call in flight).

// fleetEnv carries the child's configuration (JSON).
const fleetEnv = "SHOAL_AGENTCALLS_FLEET"

type fleetConfig struct {
	Addr   string `json:"addr"`
	Token  string `json:"token"`
	CAFile string `json:"ca_file"`
	Agents int    `json:"agents"`
}

// callsFixture is the server and its fleet, set up once per process and
// shared by the sub-benchmarks and counts.
type callsFixture struct {
	m     *Manager
	in    io.WriteCloser
	out   *bufio.Scanner
	child *exec.Cmd
	// idleCores is the replica's CPU (cores) with the fleet idle.
	idleCores float64
}

var (
	fixtureOnce sync.Once
	fixture     *callsFixture
	fixtureErr  error
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// TestMain closes the fixture, if a benchmark made one: its manager, its
// fleet, their directories.
func TestMain(m *testing.M) {
	code := m.Run()
	if fixture != nil {
		fixture.close()
	}
	for _, d := range fixtureDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

// fixtureDirs are the directories the fixture made.
var fixtureDirs []string

func (f *callsFixture) close() {
	_ = f.in.Close() // the fleet ends at the end of its input
	_ = f.child.Wait()
	f.m.Close()
}

func startCallsFixture() (*callsFixture, error) {
	dir, err := os.MkdirTemp("", "agentcalls")
	if err != nil {
		return nil, err
	}
	fixtureDirs = append(fixtureDirs, dir)
	tb := &fixtureTB{}
	c := startSecureTB(tb, secureOpts{n: 1, minHeartbeat: 30 * time.Second}, dir)
	if tb.err != nil {
		return nil, tb.err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cas[0].Root.Raw}), 0o600); err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(fleetConfig{Addr: c.addr(1), Token: c.token(security.RoleWorker), CAFile: caFile,
		Agents: envInt("SHOAL_AGENTCALLS_AGENTS", 1000)})
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAgentCallsFleet$", "-test.count", "1")
	cmd.Env = append(os.Environ(), fleetEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &callsFixture{m: c.ms[0], in: in, out: bufio.NewScanner(out), child: cmd}
	if _, err := f.await("ready"); err != nil {
		return nil, err
	}
	// What the replica costs with its fleet idle (Raft's ticks, the
	// duties), to set against the figures per call.
	cpu0, t0 := cpuNow(), time.Now()
	time.Sleep(2 * time.Second)
	f.idleCores = (cpuNow() - cpu0).Seconds() / time.Since(t0).Seconds()
	return f, nil
}

// await reads the child's lines up to one starting "agentcalls: word".
func (f *callsFixture) await(word string) ([]string, error) {
	for f.out.Scan() {
		fields := strings.Fields(f.out.Text())
		if len(fields) >= 2 && fields[0] == "agentcalls:" {
			if fields[1] == "error" {
				return nil, fmt.Errorf("fleet: %s", f.out.Text())
			}
			if fields[1] == word {
				return fields[2:], nil
			}
		}
	}
	return nil, fmt.Errorf("fleet ended before %q: %v", word, f.out.Err())
}

// fixtureTB lets the tests' set-up helpers run outside a test: the first
// failure is kept.
type fixtureTB struct {
	testing.TB
	err error
}

func (t *fixtureTB) Helper()                   {}
func (t *fixtureTB) Fatal(args ...any)         { t.fail(fmt.Sprint(args...)) }
func (t *fixtureTB) Fatalf(f string, a ...any) { t.fail(fmt.Sprintf(f, a...)) }
func (t *fixtureTB) Cleanup(func())            {}
func (t *fixtureTB) TempDir() string {
	d, err := os.MkdirTemp("", "agentcalls")
	if err != nil {
		t.fail(err.Error())
	}
	fixtureDirs = append(fixtureDirs, d)
	return d
}
func (t *fixtureTB) fail(msg string) {
	if t.err == nil {
		t.err = fmt.Errorf("%s", msg)
	}
	runtime.Goexit()
}

// cpuNow is the process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syscallsNow is the process's read and write system calls so far
// (/proc/self/io: syscr, syscw; zeros where there is none).
func syscallsNow() (reads, writes int64) {
	b, _ := os.ReadFile("/proc/self/io")
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

func allocsNow() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkAgentCallsTLS: the serving replica's CPU and allocations per
// agent call. heartbeat: heartbeats only; mix: an idle cluster's calls
// (of 50: 39 heartbeats, 8 assignment poll renewals, a poll from the
// agent's cursor that waits 1 ms and comes back empty, and 3 syncs).
func BenchmarkAgentCallsTLS(b *testing.B) {
	fixtureOnce.Do(func() {
		done := make(chan struct{})
		go func() { defer close(done); fixture, fixtureErr = startCallsFixture() }()
		<-done
		if fixtureErr == nil && fixture == nil {
			fixtureErr = fmt.Errorf("set-up failed")
		}
	})
	if fixtureErr != nil {
		b.Fatal(fixtureErr)
	}
	rate := envInt("SHOAL_AGENTCALLS_RATE", 2000)
	for _, kind := range []string{"heartbeat", "mix"} {
		b.Run(kind, func(b *testing.B) {
			f := fixture
			runtime.GC()
			cpu0, allocs0 := cpuNow(), allocsNow()
			r0, w0 := syscallsNow()
			start := time.Now()
			if _, err := fmt.Fprintf(f.in, "run %s %d %d\n", kind, b.N, rate); err != nil {
				b.Fatal(err)
			}
			got, err := f.await("done")
			if err != nil {
				b.Fatal(err)
			}
			cpu, allocs, wall := cpuNow()-cpu0, allocsNow()-allocs0, time.Since(start)
			r1, w1 := syscallsNow()
			if len(got) < 1 || got[0] != "0" {
				b.Fatalf("fleet: %v calls failed", got)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/call")
			b.ReportMetric(float64(allocs)/float64(b.N), "allocs/call")
			b.ReportMetric(float64(b.N)/wall.Seconds(), "calls/s")
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
			b.ReportMetric(f.idleCores, "idle-cores")
			b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/call")
			b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/call")
		})
	}
}

// fleetAgent is one agent of the fleet: its client, node, session and
// assignment cursor.
type fleetAgent struct {
	cl     *client.AgentClient
	node   statemachine.NodeID
	sid    uint64
	cursor wire.Cursor
}

// TestAgentCallsFleet is the fleet of BenchmarkAgentCallsTLS, run in a
// child process; it does nothing in a plain test run. It joins its agents,
// opens their sessions and takes each one's COMPLETE, says ready, then
// runs the calls each "run KIND N RATE" line on its input asks for and
// says "done FAILED".
func TestAgentCallsFleet(t *testing.T) {
	raw := os.Getenv(fleetEnv)
	if raw == "" {
		t.Skip("the fleet of BenchmarkAgentCallsTLS; runs in its child process")
	}
	say := func(format string, args ...any) { fmt.Printf("agentcalls: "+format+"\n", args...) }
	var cfg fleetConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		say("error %v", err)
		return
	}
	pemBytes, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		say("error %v", err)
		return
	}
	blk, _ := pem.Decode(pemBytes)
	root, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		say("error %v", err)
		return
	}
	ctx := context.Background()
	agents := make([]*fleetAgent, cfg.Agents)
	var failed atomic.Value
	var wg sync.WaitGroup
	turns := make(chan struct{}, 16)
	for i := range agents {
		wg.Add(1)
		turns <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-turns }()
			a, err := joinFleetAgent(ctx, cfg, root, i)
			if err != nil {
				failed.Store(err)
				return
			}
			agents[i] = a
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		say("error %v", err)
		return
	}
	say("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var kind string
		var n, rate int
		if _, err := fmt.Sscanf(in.Text(), "run %s %d %d", &kind, &n, &rate); err != nil {
			say("error %v", err)
			return
		}
		say("done %d", runFleetCalls(ctx, agents, kind, n, rate))
	}
}

func joinFleetAgent(ctx context.Context, cfg fleetConfig, root *x509.Certificate, i int) (*fleetAgent, error) {
	host := fmt.Sprintf("bench-%d", i)
	j, err := client.JoinRetrying(ctx, []string{cfg.Addr}, cfg.Token,
		client.JoinRequest{Role: "worker", Node: &client.JoinNode{Hostname: host, CPU: 64000, Memory: 1 << 40}},
		func(error) time.Duration { return 200 * time.Millisecond })
	if err != nil {
		return nil, fmt.Errorf("join %s: %w", host, err)
	}
	kp, _ := security.KeyPEM(j.Key)
	pair, err := security.KeyPair([]byte(j.Answer.Cert), kp)
	if err != nil {
		return nil, err
	}
	creds := client.NewCredentials(root, &pair)
	cl, err := client.NewAgentClient([]string{cfg.Addr}, client.AgentHTTPS(creds.TLS(), pair.Leaf.NotAfter.Sub(pair.Leaf.NotBefore)))
	if err != nil {
		return nil, err
	}
	s, err := cl.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: host, CPU: 64000, Memory: 1 << 40}})
	if err != nil {
		return nil, fmt.Errorf("session of %s: %w", host, err)
	}
	a := &fleetAgent{cl: cl, node: s.NodeID, sid: s.SessionID}
	as, err := cl.Assignments(ctx, &wire.AssignmentsRequest{NodeID: a.node, SessionID: a.sid})
	if err != nil {
		return nil, fmt.Errorf("first poll of %s: %w", host, err)
	}
	a.cursor = as.ResultsIn
	if _, err := cl.Heartbeat(ctx, &wire.Heartbeat{NodeID: a.node, SessionID: a.sid}); err != nil {
		return nil, fmt.Errorf("first heartbeat of %s: %w", host, err)
	}
	return a, nil
}

// runFleetCalls makes n calls of kind over the agents, each agent one at a
// time, the fleet paced to rate calls a second (0: unpaced), and returns
// how many failed.
func runFleetCalls(ctx context.Context, agents []*fleetAgent, kind string, n, rate int) int {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for {
				k := next.Add(1) - 1
				if k >= int64(n) {
					return
				}
				if rate > 0 {
					// Call k is due at k/rate, give or take a jitter.
					due := start.Add(time.Duration(float64(k)/float64(rate)*float64(time.Second)) +
						time.Duration(rng.Int64N(int64(time.Millisecond))))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				}
				if err := fleetCall(ctx, a, kind, k); err != nil {
					if failed.Add(1) == 1 {
						fmt.Fprintf(os.Stderr, "agentcalls: call %d (%s): %v\n", k, kind, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

func fleetCall(ctx context.Context, a *fleetAgent, kind string, k int64) error {
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch m := k % 50; {
	case kind == "mix" && m < 8:
		as, err := a.cl.Assignments(c, &wire.AssignmentsRequest{NodeID: a.node, SessionID: a.sid, Cursor: a.cursor, Wait: int64(time.Millisecond)})
		if err == nil && len(as.ResultsIn) > 0 {
			a.cursor = as.ResultsIn
		}
		return err
	case kind == "mix" && m < 11:
		_, err := a.cl.Sync(c, &wire.SyncRequest{NodeID: a.node, SessionID: a.sid})
		return err
	}
	_, err := a.cl.Heartbeat(c, &wire.Heartbeat{NodeID: a.node, SessionID: a.sid})
	return err
}
