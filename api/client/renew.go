package client

import (
	"context"
	cryptorand "crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/internal/clock"
	"shoal/security"
	"shoal/wire"
)

// Renew asks the current manager for a fresh certificate for the caller's
// own identity, presenting the current one; it returns the new key pair.
func (c *AgentClient) Renew(ctx context.Context) (certPEM []byte, keyPEM []byte, err error) {
	key, err := security.NewKey(cryptorand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csr, err := security.NewCertRequest(cryptorand.Reader, key)
	if err != nil {
		return nil, nil, err
	}
	body, _ := json.Marshal(RenewRequest{CSR: string(csr)})
	if err := c.turn(ctx); err != nil {
		return nil, nil, err
	}
	defer c.endTurn()
	base := c.current(false)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(base + "/v1/renew")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	if err := c.hosts.get(base).DoDeadline(req, resp, dl); err != nil {
		c.failed(base)
		return nil, nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, base, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		var eb ErrorBody
		if json.Unmarshal(resp.Body(), &eb) != nil || eb.Error == "" {
			return nil, nil, fmt.Errorf("%w at %s: unexpected answer (status %d)", ErrUnreachable, base, resp.StatusCode())
		}
		if resp.StatusCode() == fasthttp.StatusGone {
			return nil, nil, &wire.Error{Code: wire.CodeNodeRemoved, Message: eb.Error}
		}
		return nil, nil, &APIError{Status: resp.StatusCode(), ErrorBody: eb}
	}
	var ans RenewAnswer
	if err := json.Unmarshal(resp.Body(), &ans); err != nil {
		return nil, nil, fmt.Errorf("%w at %s: answer is not valid JSON: %v", ErrUnreachable, base, err)
	}
	kp, err := security.KeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return []byte(ans.Cert), kp, nil
}

// Renewer keeps an agent's certificate fresh: it renews at a random 50-80 %
// of the certificate's lifetime (retrying with backoff while it is still
// valid), swaps the new one into Creds for new connections, closes idle
// connections so they reconnect with it, and stores it with Save.
type Renewer struct {
	Client *AgentClient
	Creds  *Credentials
	Clock  clock.Clock                         // default: the wall clock
	Save   func(certPEM, keyPEM []byte) error  // required
	Logf   func(format string, args ...any)    // default: discard
	Seed   uint64                              // seeds the renewal draws
	OnNew  func(notBefore, notAfter time.Time) // optional: after each renewal
}

// Run renews until ctx ends or the node was removed.
func (r *Renewer) Run(ctx context.Context) error {
	if r.Clock == nil {
		r.Clock = clock.Real{}
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewPCG(r.Seed, r.Seed^0x5eed))
	failures := 0
	for {
		cur := r.Creds.Cert()
		if cur == nil || cur.Leaf == nil {
			return errors.New("renewer: no certificate to renew")
		}
		wait := security.RenewAt(cur.Leaf, rng.Float64()).Sub(r.Clock.Now())
		if failures > 0 {
			wait = security.RenewBackoff(failures, r.Clock.Now(), cur.Leaf.NotAfter)
		}
		t := r.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		certPEM, keyPEM, err := r.Client.Renew(c)
		cancel()
		var kp tls.Certificate
		if err == nil {
			kp, err = security.KeyPair(certPEM, keyPEM)
		}
		if err != nil {
			var we *wire.Error
			if errors.As(err, &we) && we.Code == wire.CodeNodeRemoved {
				return nil // the agent stops on its own
			}
			if ctx.Err() != nil {
				return nil
			}
			failures++
			r.Logf("certificate renewal failed (attempt %d; the current certificate expires %s): %v",
				failures, cur.Leaf.NotAfter.Format(time.RFC3339), err)
			continue
		}
		failures = 0
		if err := r.Save(certPEM, keyPEM); err != nil {
			r.Logf("the renewed certificate could not be stored (it is used until the agent restarts): %v", err)
		}
		r.Creds.Set(kp)
		r.Client.CloseIdleConnections()
		if r.OnNew != nil {
			r.OnNew(kp.Leaf.NotBefore, kp.Leaf.NotAfter)
		}
		r.Logf("certificate renewed; valid until %s", kp.Leaf.NotAfter.Format(time.RFC3339))
	}
}
