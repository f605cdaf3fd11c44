package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"time"

	"shoal/api/client"
	"shoal/security"
	sm "shoal/statemachine"
)

// joinTLS gives agent a its node identity as a real agent gets it: it joins
// with the worker token (the manager creates the node and signs its
// certificate) and then speaks mutual TLS with a client of its own, since
// the manager reads the node from the certificate. A vanished agent that
// returns keeps its identity, as a real one keeps DATA-DIR/tls.
func (f *Fleet) joinTLS(ctx context.Context, a *simAgent) error {
	if a.joined {
		return nil
	}
	node := a.cfg.Node
	req := client.JoinRequest{Role: string(security.RoleWorker), Node: &client.JoinNode{Hostname: node.Hostname,
		Labels: node.Labels, CPU: node.CPU, Memory: node.Memory, AgentVersion: node.AgentVersion}}
	// No manager answered, or all were busy with other joins (503): back
	// off with jitter, as a fleet of real agents does.
	j, err := client.JoinRetrying(ctx, a.managers, f.cfg.Token, req, func(error) time.Duration {
		return 500*time.Millisecond + rand.N(1500*time.Millisecond)
	})
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	keyPEM, err := security.KeyPEM(j.Key)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair([]byte(j.Answer.Cert), keyPEM)
	if err != nil {
		return fmt.Errorf("join: the manager's certificate: %w", err)
	}
	roots, err := security.ParseCerts([]byte(j.Answer.CA))
	if err != nil || len(roots) == 0 {
		return fmt.Errorf("join: the manager's CA: %v", err)
	}
	if err := a.store.SaveNodeID(sm.NodeID(j.Answer.NodeID)); err != nil {
		return err
	}
	a.creds = client.NewCredentials(roots[0], &cert)
	// As a real agent's: its long poll and one connection for the rest.
	a.hc = client.AgentHTTPS(a.creds.TLS(), cert.Leaf.NotAfter.Sub(cert.Leaf.NotBefore))
	ac, err := client.NewAgentClient(a.managers, a.hc)
	if err != nil {
		return err
	}
	a.mgr.inner = ac
	a.joined = true
	return nil
}

// renew keeps agent a's certificate fresh while its run lasts (kept in
// memory: the simulated agent's store is its memory).
func (f *Fleet) renew(ctx context.Context, a *simAgent) {
	r := &client.Renewer{Client: a.mgr.inner, Creds: a.creds, Seed: a.cfg.Seed ^ 0xce47,
		Save: func(_, _ []byte) error { return nil }}
	if err := r.Run(ctx); err != nil && ctx.Err() == nil {
		f.cfg.Logger.Warn("loadgen: certificate renewal stopped", "host", a.cfg.Node.Hostname, "err", err)
	}
}
