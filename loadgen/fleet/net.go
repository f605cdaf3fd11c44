package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// Fleet workers on other hosts. A worker (`shoal loadgen fleet
// --coordinator ADDR --token TOKEN`) opens two TLS connections to the
// loadgen, the coordinator: a control connection, then net/rpc as between
// the loadgen and its local children (the worker serves, the coordinator
// calls), and an observations connection, carrying what fd 3 carries
// locally. Before net/rpc starts, the control connection carries a few
// JSON lines: the worker's hello, the coordinator's welcome (or refusal),
// the clock probes that measure the worker's clock offset, and at last the
// worker's share of the agents (ChildConfig).
//
// The token is the run's own: "shoal-lg-RUN-PIN-SECRET". RUN names the
// run, PIN is the SHA-256 (first 16 bytes) of the coordinator's
// self-signed certificate, SECRET a random 128-bit secret. The worker sends
// the secret only to a coordinator whose certificate matches PIN, so
// neither the secret nor the cluster's worker join token in ChildConfig
// travels to anyone else; a worker from another run (or with a wrong
// token) is refused with a line saying which.

const (
	tokenPrefix  = "shoal-lg-"
	protoVersion = 2 // 2: observations in their own framing (obscodec.go), not gob
	clockProbes  = 8
	lineMax      = 1 << 20
)

// Token is a run's fleet token, as parsed.
type Token struct {
	Run    string
	Pin    string // hex
	Secret string // hex
}

func (t Token) String() string { return tokenPrefix + t.Run + "-" + t.Pin + "-" + t.Secret }

// ParseToken reads a fleet token.
func ParseToken(s string) (Token, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	parts := strings.Split(rest, "-")
	if !ok || len(parts) != 3 || len(parts[0]) != 8 || len(parts[1]) != 32 || len(parts[2]) != 32 {
		return Token{}, errors.New("not a loadgen fleet token (shoal-lg-RUN-PIN-SECRET, as the coordinator printed it)")
	}
	return Token{Run: parts[0], Pin: parts[1], Secret: parts[2]}, nil
}

// hello is a worker's first line on each connection.
type hello struct {
	Version int
	Run     string
	// Secret is empty when the coordinator's certificate did not match the
	// token's pin: the worker then tells only which run it is for.
	Secret string
	Stream string // "control" or "obs"
	Worker int    // obs: the number the welcome gave
	Host   string
	Pid    int
}

// welcome is the coordinator's answer to a hello.
type welcome struct {
	Refused string // non-empty: why the worker is refused
	Worker  int
}

// controlMsg is a coordinator's line after the welcome: a clock probe, or
// the worker's share (then net/rpc starts).
type controlMsg struct {
	Probe  bool
	Config *ChildConfig
}

// probeAnswer is the worker's clock at a probe (unix ns).
type probeAnswer struct{ Now int64 }

func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readLine reads one JSON line byte by byte, so that nothing past it is
// buffered away from net/rpc or the observation decoder.
func readLine(r io.Reader, v any) error {
	var buf []byte
	one := make([]byte, 1)
	for {
		if _, err := io.ReadFull(r, one); err != nil {
			return err
		}
		if one[0] == '\n' {
			break
		}
		if buf = append(buf, one[0]); len(buf) > lineMax {
			return errors.New("line too long")
		}
	}
	return json.Unmarshal(buf, v)
}

// Hub is the coordinator's listener for fleet workers.
type Hub struct {
	ln    net.Listener
	token Token
	logf  func(format string, args ...any)
	mu    sync.Mutex
	next  int
	want  int       // workers the run takes (0: not known yet; every one is held)
	full  bool      // the run has its workers: any further one is refused
	held  []*Worker // handshaken, waiting for their share
	obs   map[int]chan net.Conn
	ready chan struct{} // a worker was added to held
}

// Worker is a fleet worker that passed the handshake, with its measured
// clock offset.
type Worker struct {
	ID      int
	Host    string
	Pid     int
	Remote  string // its address as the coordinator saw it
	ctl     net.Conn
	obsConn net.Conn
	// Offset is the worker's clock minus the coordinator's, and Bound its
	// error bound (half the round trip of the probe it came from).
	Offset, Bound time.Duration
}

// Listen opens the coordinator's listener on addr with a new run token;
// logf gets a line per refused worker.
func Listen(addr string, logf func(format string, args ...any)) (*Hub, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "shoal loadgen coordinator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	run, secret := make([]byte, 4), make([]byte, 16)
	_, _ = rand.Read(run)
	_, _ = rand.Read(secret)
	tok := Token{Run: hex.EncodeToString(run), Pin: hex.EncodeToString(sum[:16]), Secret: hex.EncodeToString(secret)}
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13}
	ln, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return nil, fmt.Errorf("listen for fleet workers on %s: %w", addr, err)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	h := &Hub{ln: ln, token: tok, logf: logf, obs: map[int]chan net.Conn{}, ready: make(chan struct{}, 1)}
	go h.accept()
	return h, nil
}

// Token is the run's token, for the workers' --token.
func (h *Hub) Token() Token { return h.token }

// Addr is the listener's address.
func (h *Hub) Addr() net.Addr { return h.ln.Addr() }

// Close stops taking workers and closes those still held.
func (h *Hub) Close() error {
	err := h.ln.Close()
	h.mu.Lock()
	for _, w := range h.held {
		w.close()
	}
	h.held = nil
	h.mu.Unlock()
	return err
}

func (w *Worker) close() {
	_ = w.ctl.Close()
	if w.obsConn != nil {
		_ = w.obsConn.Close()
	}
}

func (h *Hub) accept() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		go h.handshake(c)
	}
}

// refuse answers a hello with why the worker is refused.
func (h *Hub) refuse(c net.Conn, from, why string) {
	h.logf("refused a fleet worker from %s: %s", from, why)
	_ = writeLine(c, welcome{Refused: why})
	_ = c.Close()
}

func (h *Hub) handshake(c net.Conn) {
	from := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	var hi hello
	if err := readLine(c, &hi); err != nil {
		h.logf("a connection from %s is not a fleet worker: %v", from, err)
		_ = c.Close()
		return
	}
	switch {
	case hi.Version != protoVersion:
		h.refuse(c, from, fmt.Sprintf("the worker speaks fleet protocol %d, this coordinator %d: run the same shoal version on both", hi.Version, protoVersion))
		return
	case hi.Run != h.token.Run:
		h.refuse(c, from, fmt.Sprintf("the worker's token is for loadgen run %s, and this coordinator runs %s: a worker of another run (use the token this run printed)", hi.Run, h.token.Run))
		return
	case hi.Secret == "":
		h.refuse(c, from, "the coordinator's certificate does not match the worker's token: it is not the coordinator that printed the token")
		return
	case subtle.ConstantTimeCompare([]byte(hi.Secret), []byte(h.token.Secret)) != 1:
		h.refuse(c, from, "wrong token: its secret is not this run's")
		return
	}
	if hi.Stream == "obs" {
		h.mu.Lock()
		ch := h.obs[hi.Worker]
		delete(h.obs, hi.Worker)
		h.mu.Unlock()
		if ch == nil {
			h.refuse(c, from, fmt.Sprintf("no worker %d waits for its observations connection", hi.Worker))
			return
		}
		_ = writeLine(c, welcome{Worker: hi.Worker})
		_ = c.SetDeadline(time.Time{})
		ch <- c
		return
	}
	h.mu.Lock()
	if h.full || (h.want > 0 && len(h.held) >= h.want) {
		h.mu.Unlock()
		h.refuse(c, from, fmt.Sprintf("this run already has the %d workers it waits for", h.want))
		return
	}
	h.next++
	w := &Worker{ID: h.next, Host: hi.Host, Pid: hi.Pid, Remote: from, ctl: c}
	ch := make(chan net.Conn, 1)
	h.obs[w.ID] = ch
	h.mu.Unlock()
	fail := func(err error) {
		h.logf("fleet worker %d (%s on %s) dropped during the handshake: %v", w.ID, hi.Host, from, err)
		h.mu.Lock()
		delete(h.obs, w.ID)
		h.mu.Unlock()
		w.close()
	}
	if err := writeLine(c, welcome{Worker: w.ID}); err != nil {
		fail(err)
		return
	}
	select {
	case w.obsConn = <-ch:
	case <-time.After(30 * time.Second):
		fail(errors.New("its observations connection did not come"))
		return
	}
	if err := w.measure(); err != nil {
		fail(err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	h.mu.Lock()
	if h.full || (h.want > 0 && len(h.held) >= h.want) {
		h.mu.Unlock()
		h.refuse(c, from, fmt.Sprintf("this run already has the %d workers it waits for", h.want))
		w.close()
		return
	}
	h.held = append(h.held, w)
	h.mu.Unlock()
	select {
	case h.ready <- struct{}{}:
	default:
	}
}

// measure probes the worker's clock NTP-style and keeps the probe with the
// shortest round trip: offset = worker's time − the midpoint of the round
// trip, within ± half the round trip.
func (w *Worker) measure() error {
	best := time.Duration(-1)
	for range clockProbes {
		t0 := time.Now()
		if err := writeLine(w.ctl, controlMsg{Probe: true}); err != nil {
			return err
		}
		var a probeAnswer
		if err := readLine(w.ctl, &a); err != nil {
			return err
		}
		t1 := time.Now()
		rtt := t1.Sub(t0)
		if best < 0 || rtt < best {
			best = rtt
			mid := t0.Add(rtt / 2)
			w.Offset, w.Bound = time.Unix(0, a.Now).Sub(mid), rtt/2+time.Microsecond
		}
	}
	return nil
}

// Wait waits until n workers passed the handshake (refusing any further
// ones) and returns them, or the context ends; every tick (if > 0) it calls
// progress with how many are in.
func (h *Hub) Wait(ctx context.Context, n int, progress func(in int)) ([]*Worker, error) {
	h.mu.Lock()
	h.want = n
	h.mu.Unlock()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		h.mu.Lock()
		in := len(h.held)
		if in >= n {
			ws := h.held[:n]
			h.held, h.full = nil, true
			h.mu.Unlock()
			return ws, nil
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d fleet workers connected: %w", in, n, ctx.Err())
		case <-h.ready:
		case <-tick.C:
			if progress != nil {
				progress(in)
			}
		}
	}
}

// Dial connects a worker to the coordinator at addr with tok; it returns
// once the coordinator welcomed it (a refusal is an error saying why), with
// the connections to hand to Work.
func Dial(ctx context.Context, addr string, tok Token, host string, pid int) (*Conn, error) {
	ctl, err := dialOne(ctx, addr, tok, hello{Version: protoVersion, Run: tok.Run, Stream: "control", Host: host, Pid: pid})
	if err != nil {
		return nil, err
	}
	var wl welcome
	if err := readLine(ctl.c, &wl); err != nil {
		ctl.c.Close()
		return nil, fmt.Errorf("the coordinator at %s closed the connection: %w", addr, err)
	}
	if wl.Refused != "" {
		ctl.c.Close()
		return nil, &RefusedError{Addr: addr, Why: wl.Refused}
	}
	obs, err := dialOne(ctx, addr, tok, hello{Version: protoVersion, Run: tok.Run, Stream: "obs", Worker: wl.Worker, Host: host, Pid: pid})
	if err != nil {
		ctl.c.Close()
		return nil, err
	}
	var ow welcome
	if err := readLine(obs.c, &ow); err != nil || ow.Refused != "" {
		ctl.c.Close()
		obs.c.Close()
		if err == nil {
			return nil, &RefusedError{Addr: addr, Why: ow.Refused}
		}
		return nil, fmt.Errorf("the coordinator at %s closed the observations connection: %w", addr, err)
	}
	return &Conn{ID: wl.Worker, ctl: ctl.c, obs: obs.c}, nil
}

// RefusedError is the coordinator's refusal of a worker.
type RefusedError struct{ Addr, Why string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the coordinator at %s refused this worker: %s", e.Addr, e.Why)
}

type dialed struct{ c net.Conn }

// dialOne opens one TLS connection and sends hi, with the secret only if
// the coordinator's certificate matches the token's pin.
func dialOne(ctx context.Context, addr string, tok Token, hi hello) (dialed, error) {
	pinned := false
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, // checked against the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
				pinned = hex.EncodeToString(sum[:16]) == tok.Pin
			}
			return nil
		}}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 5 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return dialed{}, fmt.Errorf("connect to the coordinator at %s: %w", addr, err)
	}
	if pinned {
		hi.Secret = tok.Secret
	}
	if err := writeLine(c, hi); err != nil {
		c.Close()
		return dialed{}, err
	}
	return dialed{c}, nil
}

// Conn is a worker's welcomed connections.
type Conn struct {
	ID       int
	ctl, obs net.Conn
}

// Close closes both connections.
func (c *Conn) Close() error {
	c.obs.Close()
	return c.ctl.Close()
}

// Config answers the coordinator's clock probes (with now) until it sends
// the worker's share, and returns it.
func (c *Conn) Config(now func() time.Time) (ChildConfig, error) {
	for {
		var m controlMsg
		if err := readLine(c.ctl, &m); err != nil {
			return ChildConfig{}, fmt.Errorf("the coordinator closed the connection before handing this worker its agents: %w", err)
		}
		if m.Config != nil {
			return *m.Config, nil
		}
		if err := writeLine(c.ctl, probeAnswer{Now: now().UnixNano()}); err != nil {
			return ChildConfig{}, err
		}
	}
}

// Streams returns the control connection (net/rpc, after Config) and the
// observations connection.
func (c *Conn) Streams() (ctl, obs net.Conn) { return c.ctl, c.obs }
