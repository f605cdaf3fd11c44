package client

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"shoal/security"
)

// ErrJoinRefused wraps every answer that retrying will not change: the
// token was refused, the manager belongs to another cluster, or it does not
// speak TLS. The message says which.
var ErrJoinRefused = errors.New("join refused")

// Credentials are a client's TLS identity: the cluster root it trusts and a
// certificate that a renewal may replace while connections use it (new
// connections present the new one).
type Credentials struct {
	roots *x509.CertPool
	cert  atomic.Pointer[tls.Certificate]
}

// NewCredentials trusts root and presents cert (nil: no client certificate).
func NewCredentials(root *x509.Certificate, cert *tls.Certificate) *Credentials {
	c := &Credentials{roots: security.PoolOf(root)}
	if cert != nil {
		c.Set(*cert)
	}
	return c
}

// Cert returns the current certificate (nil if none).
func (c *Credentials) Cert() *tls.Certificate { return c.cert.Load() }

// Set replaces the certificate.
func (c *Credentials) Set(cert tls.Certificate) { c.cert.Store(&cert) }

// TLS returns a client configuration presenting the current certificate.
func (c *Credentials) TLS() *tls.Config { return security.ClientTLS(c.roots, c.Cert) }

// Joined is the outcome of a join: the fresh key and what the manager
// answered.
type Joined struct {
	Key    *ecdsa.PrivateKey
	Answer JoinAnswer
}

// Join asks the managers at addrs, in turn, for a certificate with token:
// the manager's CA is checked against the token's digest before the token
// is sent. A refusal is final (ErrJoinRefused, naming the problem); only
// when no manager could be reached does it return ErrUnreachable.
func Join(ctx context.Context, addrs []string, token string, req JoinRequest) (*Joined, error) {
	key, err := security.NewKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return JoinKeyed(ctx, addrs, token, req, key)
}

// JoinKeyed joins like Join with key. A worker's join asked again with the
// same key and hostname (its answer was lost, or it timed out while the
// manager went on) gets the node of the first back instead of a second one.
func JoinKeyed(ctx context.Context, addrs []string, token string, req JoinRequest, key *ecdsa.PrivateKey) (*Joined, error) {
	j, err := newJoiner(token, req, key)
	if err != nil {
		return nil, err
	}
	defer j.hc.CloseIdleConnections()
	return j.join(ctx, addrs)
}

// joiner is one join's request, signed once, and its HTTP client (kept
// over the attempts of JoinRetrying: a retry after a busy answer reuses
// the connection instead of a new handshake).
type joiner struct {
	tok  security.Token
	key  *ecdsa.PrivateKey
	body []byte
	hc   *http.Client
}

func newJoiner(token string, req JoinRequest, key *ecdsa.PrivateKey) (*joiner, error) {
	tok, err := security.ParseToken(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJoinRefused, err)
	}
	csr, err := security.NewCertRequest(rand.Reader, key)
	if err != nil {
		return nil, err
	}
	req.Token, req.CSR = tok.String(), string(csr)
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cfg := security.PinnedTLS(tok.Digest)
	tr := &http.Transport{TLSClientConfig: cfg}
	if setupsLimited() {
		tr.DialTLSContext = limitedTLSDial(cfg)
	}
	return &joiner{tok: tok, key: key, body: body, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

func (j *joiner) join(ctx context.Context, addrs []string) (*Joined, error) {
	var lastErr error
	for _, addr := range addrs {
		base, err := baseURL(strings.TrimSpace(addr), true)
		if err != nil {
			return nil, err
		}
		var ans JoinAnswer
		err = joinOnce(ctx, j.hc, base, j.body, &ans)
		if err == nil {
			if cs, err := security.ParseCerts([]byte(ans.CA)); err != nil || security.DigestOf(cs[0].Raw) != j.tok.Digest {
				return nil, fmt.Errorf("%w: the manager at %s answered with a CA that does not match the token", ErrJoinRefused, base)
			}
			return &Joined{Key: j.key, Answer: ans}, nil
		}
		if errors.Is(err, ErrJoinRefused) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// limitedTLSDial sets up a join's TLS connection in a set-up turn
// (LimitSetups), after every agent's own set-ups waiting.
func limitedTLSDial(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// The turn comes before the dial: a manager waits for a client's
		// hello only so long once it accepted the connection.
		release, err := acquireSetup(ctx, setupJoin)
		if err != nil {
			return nil, err
		}
		defer release()
		raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := tls.Client(raw, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			var re tls.RecordHeaderError
			if errors.As(err, &re) && string(re.RecordHeader[:]) == "HTTP/" {
				return nil, errors.New("server gave HTTP response to HTTPS client")
			}
			return nil, err
		}
		return c, nil
	}
}

func joinOnce(ctx context.Context, hc *http.Client, base string, body []byte, out *JoinAnswer) error {
	hreq, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/join", bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hreq)
	if err != nil {
		switch {
		case errors.Is(err, security.ErrManagerNotPinned):
			return fmt.Errorf("%w by the manager at %s: %w", ErrJoinRefused, base, security.ErrManagerNotPinned)
		case strings.Contains(err.Error(), "server gave HTTP response"):
			return fmt.Errorf("%w: the manager at %s speaks plain HTTP, not TLS (started with --insecure or --dev?): join it without a token", ErrJoinRefused, base)
		}
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			return fmt.Errorf("%w at %s: unexpected answer %s", ErrUnreachable, base, resp.Status)
		}
		if resp.StatusCode >= 500 {
			return fmt.Errorf("%w at %s: %s", ErrUnreachable, base, eb.Error)
		}
		return fmt.Errorf("%w by the manager at %s: %s", ErrJoinRefused, base, eb.Error)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%w at %s: answer is not valid JSON: %v", ErrUnreachable, base, err)
	}
	return nil
}

// ShowToken returns the join token of role ("worker" or "manager").
func (c *Client) ShowToken(ctx context.Context, role string) (TokenDoc, error) {
	var d TokenDoc
	_, err := c.do(ctx, "GET", "/v1/tokens/"+role, nil, nil, &d)
	return d, err
}

// RotateToken replaces the join token of role and returns the new one.
func (c *Client) RotateToken(ctx context.Context, role string) (TokenDoc, error) {
	var d TokenDoc
	_, err := c.do(ctx, "POST", "/v1/tokens/"+role+"/rotate", nil, nil, &d)
	return d, err
}

// Replicas returns the cluster's membership.
func (c *Client) Replicas(ctx context.Context) (Replicas, error) {
	var r Replicas
	_, err := c.do(ctx, "GET", "/v1/replicas", nil, nil, &r)
	return r, err
}

// AddReplica adds a replica to the membership of every group.
func (c *Client) AddReplica(ctx context.Context, r Replica) (Replicas, error) {
	var out Replicas
	_, err := c.do(ctx, "POST", "/v1/replicas", nil, r, &out)
	return out, err
}

// RemoveReplica removes a replica from the membership of every group.
func (c *Client) RemoveReplica(ctx context.Context, id uint64) (Replicas, error) {
	var out Replicas
	_, err := c.do(ctx, "DELETE", "/v1/replicas/"+strconv.FormatUint(id, 10), nil, nil, &out)
	return out, err
}

// JoinRetrying joins like Join, asking again while no manager could be
// reached or all were busy (one may be starting, or a fleet joining at
// once): after each such failure it waits what retry returns for it. A
// refusal, or ctx ending, is final. Each attempt gets 30 seconds; all use
// one key, so a worker joins as one node however often it asks.
func JoinRetrying(ctx context.Context, addrs []string, token string, req JoinRequest,
	retry func(err error) time.Duration) (*Joined, error) {
	key, err := security.NewKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	j, err := newJoiner(token, req, key)
	if err != nil {
		return nil, err
	}
	defer j.hc.CloseIdleConnections()
	for {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		joined, err := j.join(c, addrs)
		cancel()
		switch {
		case err == nil:
			return joined, nil
		case errors.Is(err, ErrJoinRefused):
			return nil, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(retry(err)):
		}
	}
}
