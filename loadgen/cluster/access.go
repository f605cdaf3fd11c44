package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"shoal/api/client"
	"shoal/security/tlsdir"
)

// Access is how the loadgen reaches the managers, as a user would: with
// the admin credential of the cluster (TLS, the default) or in plain HTTP
// (managers started with --insecure). Agents join with WorkerToken.
type Access struct {
	TLS         *tls.Config // the admin client credential; nil: plain HTTP
	WorkerToken string      // the worker join token; empty with plain HTTP

	once sync.Once
	hc   *http.Client // for /metrics and /debug/pprof
}

// Insecure reports whether the managers speak plain HTTP.
func (a *Access) Insecure() bool { return a == nil || a.TLS == nil }

// Client returns a client of the manager at addr.
func (a *Access) Client(addr string) (*client.Client, error) {
	if a.Insecure() {
		return client.New(addr)
	}
	return client.NewTLS(addr, a.TLS)
}

// url returns addr's URL for path.
func (a *Access) url(addr, path string) string {
	if a.Insecure() {
		return "http://" + addr + path
	}
	return "https://" + addr + path
}

// httpClient returns the client for /metrics and /debug/pprof (requests
// carry their own deadlines).
func (a *Access) httpClient() *http.Client {
	a.once.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig, t.MaxIdleConnsPerHost = a.TLS, 4
		a.hc = &http.Client{Transport: t}
	})
	return a.hc
}

// Status asks the manager at addr for its status.
func (a *Access) Status(ctx context.Context, addr string) (client.Status, error) {
	cl, err := a.Client(addr)
	if err != nil {
		return client.Status{}, err
	}
	return cl.Status(ctx)
}

// AdminAccess reads the admin credential in dir (ca.crt, admin.crt,
// admin.key: a manager's DATA-DIR/tls) and asks the manager at addr for the
// worker join token.
func AdminAccess(ctx context.Context, dir, addr string) (*Access, error) {
	root, cert, err := tlsdir.Dir(dir).AdminCredential()
	if err != nil {
		return nil, err
	}
	a := &Access{TLS: client.NewCredentials(root, &cert).TLS()}
	tok, err := a.token(ctx, addr, "worker")
	if err != nil {
		return nil, err
	}
	a.WorkerToken = tok
	return a, nil
}

// token reads a join token from the manager at addr, waiting (until ctx
// ends) while it does not answer yet.
func (a *Access) token(ctx context.Context, addr, role string) (string, error) {
	cl, err := a.Client(addr)
	if err != nil {
		return "", err
	}
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := cl.ShowToken(tctx, role)
		cancel()
		if err == nil {
			return d.Token, nil
		}
		var ae *client.APIError
		if errors.As(err, &ae) {
			return "", fmt.Errorf("the %s join token from %s: %w", role, addr, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the %s join token from %s: %w (last: %v)", role, addr, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
