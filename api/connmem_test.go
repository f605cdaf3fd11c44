package api

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/security"
)

// What a manager's API holds for each connected agent: its TLS
// connections (an agent holds up to client.AgentConnsPerManager to a
// manager: its long poll, its heartbeats, its short calls), the parsed
// client certificates, the connections' wrappers and the requests parked
// on them. The agents run in a process of their own (this test binary
// again, TestHeapPerAgentClients), so the heap measured is the server's
// alone: the listener stack of a manager (Guard, LimitHandshakes over
// ServerTLS with shared tickets that carry identities) and the HTTP server
// with connSettings. For comparison: SHOAL_CONNMEM_CHAINS=1, tickets that
// carry the certificate chain (crypto/tls's own); SHOAL_CONNMEM_X25519=1,
// agents that offer a classical key share only.

const (
	connMemEnv    = "SHOAL_CONNMEM" // the clients' mode: address, directory, agents, calls
	connMemAgents = 300
	connMemCalls  = 100 // heartbeats per agent after the set-up, for the CPU figure
)

// BenchmarkHeapPerAgent reports the server's live heap per connected
// agent (after the agents' set-up: a poll answered with a 4 KiB frame and
// parked again, a 2 KiB status report held while a heartbeat goes by, so
// each agent holds three connections) and the server's CPU per heartbeat
// once they are set up.
func BenchmarkHeapPerAgent(b *testing.B) {
	for b.Loop() {
		heap, conns, cpu := heapPerAgent(b, connMemAgents)
		b.ReportMetric(heap, "heap-bytes/agent")
		b.ReportMetric(heap*connMemAgents/float64(conns), "heap-bytes/conn")
		b.ReportMetric(float64(conns)/connMemAgents, "conns/agent")
		b.ReportMetric(cpu, "server-cpu-µs/call")
	}
}

func heapPerAgent(tb testing.TB, agents int) (bytesPerAgent float64, conns int64, cpuPerCall float64) {
	dir := tb.TempDir()
	now := time.Now()
	ca, err := security.NewCA(rand.Reader, now.Add(-time.Minute))
	if err != nil {
		tb.Fatal(err)
	}
	issue := func(role security.Role, name string) ([][]byte, *ecdsa.PrivateKey) {
		k, err := security.NewKey(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		ders, err := ca.Issue(rand.Reader, security.Request{Role: role, Name: name, Key: &k.PublicKey, Hosts: []string{"127.0.0.1"}}, now.Add(-time.Minute))
		if err != nil {
			tb.Fatal(err)
		}
		return ders, k
	}
	writePEM := func(name string, blocks []*pem.Block) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		for _, bl := range blocks {
			if err := pem.Encode(f, bl); err != nil {
				tb.Fatal(err)
			}
		}
	}
	writePEM("ca.pem", []*pem.Block{{Type: "CERTIFICATE", Bytes: ca.Root.Raw}})
	var blocks []*pem.Block
	for i := range agents {
		ders, k := issue(security.RoleWorker, strconv.Itoa(i+1))
		kd, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			tb.Fatal(err)
		}
		blocks = append(blocks, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
		for _, d := range ders {
			blocks = append(blocks, &pem.Block{Type: "CERTIFICATE", Bytes: d})
		}
	}
	writePEM("agents.pem", blocks)
	srvDER, srvKey := issue(security.RoleManager, "1")
	srvCert := &tls.Certificate{Certificate: srvDER, PrivateKey: srvKey}

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	guard := Guard(raw, 0, nil, nil)
	cfg := security.ServerTLS(func() *tls.Certificate { return srvCert }, ca.RootPool())
	if err := security.ShareTickets(cfg, ca); err != nil {
		tb.Fatal(err)
	}
	if os.Getenv(connMemEnv+"_CHAINS") == "" { // set: tickets carry the chain (for comparison)
		if err := security.IdentityTickets(cfg, ca, time.Now); err != nil {
			tb.Fatal(err)
		}
	}
	ln := LimitHandshakes(guard, cfg, 0, 0, nil)
	release := make(chan struct{})
	frame := make([]byte, 4096)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if _, ok, err := peerIdentity(ctx, ca.ClusterID); !ok || err != nil {
			ctx.SetStatusCode(fasthttp.StatusUnauthorized)
			return
		}
		switch string(ctx.Path()) {
		case "/poll":
			if len(ctx.QueryArgs().Peek("park")) > 0 {
				<-release
			}
			ctx.SetBody(frame)
		case "/status":
			time.Sleep(50 * time.Millisecond) // a report waiting for its commit
			ctx.SetBodyString("ok")
		default:
			ctx.SetBodyString("ok")
		}
	}}
	connSettings(srv)
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		close(release)
		_ = srv.Shutdown()
	}()

	liveHeap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := liveHeap()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHeapPerAgentClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d,%d", connMemEnv, raw.Addr(), dir, agents, connMemCalls))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		for lines.Scan() {
			if lines.Text() == want {
				return
			}
		}
		tb.Fatalf("the agents' process ended before %q: %v", want, lines.Err())
	}
	expect("ready")
	after := liveHeap()
	if file := os.Getenv(connMemEnv + "_PROFILE"); file != "" {
		// A heap profile of what the agents hold (with -test.memprofilerate=1).
		f, err := os.Create(file)
		if err != nil {
			tb.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			tb.Fatal(err)
		}
		_ = f.Close()
	}
	conns = guard.(*guardedListener).open.Load()
	cpu0 := cpuTime()
	_, _ = fmt.Fprintln(stdin, "calls")
	expect("done")
	cpu := cpuTime() - cpu0
	return float64(after-before) / float64(agents), conns, float64(cpu.Microseconds()) / float64(agents*connMemCalls)
}

// cpuTime is the CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestHeapPerAgentClients is the agents' process of BenchmarkHeapPerAgent
// (skipped unless it started it): each agent, with the agents' own HTTP
// client, polls (answered), polls again (parked), sends a status report
// and, while the report waits, a heartbeat. It prints "ready", then on a
// line from its input sends each agent's heartbeats and prints "done";
// it exits when its input closes.
func TestHeapPerAgentClients(t *testing.T) {
	mode := os.Getenv(connMemEnv)
	if mode == "" {
		t.Skip("run by BenchmarkHeapPerAgent")
	}
	parts := strings.Split(mode, ",")
	addr, dir := parts[0], parts[1]
	agents, _ := strconv.Atoi(parts[2])
	calls, _ := strconv.Atoi(parts[3])
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	rest, err := os.ReadFile(filepath.Join(dir, "agents.pem"))
	if err != nil {
		t.Fatal(err)
	}
	var certs []*tls.Certificate
	for {
		var bl *pem.Block
		bl, rest = pem.Decode(rest)
		if bl == nil {
			break
		}
		switch bl.Type {
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(bl.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			certs = append(certs, &tls.Certificate{PrivateKey: k})
		case "CERTIFICATE":
			c := certs[len(certs)-1]
			c.Certificate = append(c.Certificate, bl.Bytes)
		}
	}
	if len(certs) != agents {
		t.Fatalf("%d certificates, want %d", len(certs), agents)
	}
	hcs := make([]*fasthttp.Client, agents)
	call := func(hc *fasthttp.Client, path string, body []byte) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("https://" + addr + path)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetBody(body)
		if err := hc.DoTimeout(req, resp, time.Minute); err != nil {
			return err
		}
		if resp.StatusCode() != fasthttp.StatusOK {
			return fmt.Errorf("%s: status %d", path, resp.StatusCode())
		}
		return nil
	}
	report, beat := make([]byte, 2048), make([]byte, 64)
	var wg sync.WaitGroup
	errs := make(chan error, 4*agents)
	turns := make(chan struct{}, 32)
	for i, c := range certs {
		ctls := security.ClientTLS(roots, func() *tls.Certificate { return c })
		if os.Getenv(connMemEnv+"_X25519") != "" { // set: a classical key share only (a hello 1.2 kB shorter), for comparison
			ctls.CurvePreferences = []tls.CurveID{tls.X25519}
		}
		hcs[i] = client.AgentHTTPS(ctls, 0)
		wg.Add(1)
		go func(hc *fasthttp.Client) {
			defer wg.Done()
			turns <- struct{}{}
			defer func() { <-turns }()
			if err := call(hc, "/poll", beat); err != nil {
				errs <- err
				return
			}
			go func() { _ = call(hc, "/poll?park=1", beat) }() // held until the server ends
			var inner sync.WaitGroup
			inner.Add(1)
			go func() {
				defer inner.Done()
				if err := call(hc, "/status", report); err != nil {
					errs <- err
				}
			}()
			time.Sleep(10 * time.Millisecond) // the report is on its way
			if err := call(hc, "/heartbeat", beat); err != nil {
				errs <- err
			}
			inner.Wait()
		}(hcs[i])
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	time.Sleep(200 * time.Millisecond) // the parked polls reach the server
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		for _, hc := range hcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				turns <- struct{}{}
				defer func() { <-turns }()
				for range calls {
					if err := call(hc, "/heartbeat", beat); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		fmt.Println("done")
	}
}
