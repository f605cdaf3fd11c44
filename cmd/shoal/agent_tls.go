package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"shoal/agent"
	"shoal/api/client"
	"shoal/security"
	"shoal/security/tlsdir"
	"shoal/statemachine"
	"shoal/wire"
)

// agentClient returns the agent's client of the managers: plain HTTP with
// --insecure, else TLS with the node certificate in DATA-DIR/tls (obtained
// with the join token on the first start) and the renewer that keeps it
// fresh.
func agentClient(ctx context.Context, o agentOptions, addrs []string, node wire.NodeDescription, store agent.Store,
	log *slog.Logger) (*client.AgentClient, *client.Renewer, error) {
	if o.insecure {
		if o.token != "" {
			return nil, nil, errors.New("--token joins a cluster with TLS; --insecure talks to managers without it: give one of them")
		}
		mgr, err := client.NewAgentClient(addrs, client.AgentHTTPS(nil, 0))
		return mgr, nil, err
	}
	dir := tlsDirOf(o.dataDir)
	if !dir.HasPair(tlsdir.Node) || !dir.Has(tlsdir.RootCert) {
		if o.token == "" {
			return nil, nil, errors.New("this agent has no node certificate yet: pass the worker join token with --token " +
				"(print it on a manager with `shoal token worker`), or --insecure for managers started with --insecure")
		}
		j, err := joinWithRetry(ctx, addrs, o.token, client.JoinRequest{Role: string(security.RoleWorker),
			Node: &client.JoinNode{Hostname: node.Hostname, Labels: node.Labels, CPU: node.CPU, Memory: node.Memory,
				AgentVersion: node.AgentVersion}}, os.Stderr)
		if err != nil {
			return nil, nil, err
		}
		if err := errors.Join(dir.WriteRoot([]byte(j.Answer.CA)), dir.WritePairKey(tlsdir.Node, []byte(j.Answer.Cert), j.Key)); err != nil {
			return nil, nil, err
		}
		log.Info("agent: joined the cluster with the token", "node", j.Answer.NodeID)
	}
	root, err := dir.Root()
	if err != nil {
		return nil, nil, err
	}
	cert, err := dir.Pair(tlsdir.Node)
	if err != nil {
		return nil, nil, err
	}
	id, err := security.Identify(cert.Leaf, cert.Leaf.Subject.Organization[0])
	if err != nil || id.Role != security.RoleWorker {
		return nil, nil, fmt.Errorf("%s does not hold a node certificate: clear it to join again with a token", dir)
	}
	// The certificate names the node: the agent speaks for it.
	if err := store.SaveNodeID(statemachine.NodeID(id.NodeID())); err != nil {
		return nil, nil, err
	}
	creds := client.NewCredentials(root, &cert)
	mgr, err := client.NewAgentClient(addrs, client.AgentHTTPS(creds.TLS(), cert.Leaf.NotAfter.Sub(cert.Leaf.NotBefore)))
	if err != nil {
		return nil, nil, err
	}
	h := fnv.New64a()
	h.Write(cert.Leaf.Raw)
	renew := &client.Renewer{Client: mgr, Creds: creds, Seed: h.Sum64() ^ uint64(time.Now().UnixNano()),
		Save: func(c, k []byte) error { return dir.WritePair(tlsdir.Node, c, k) },
		Logf: func(format string, args ...any) { log.Info("agent: " + fmt.Sprintf(format, args...)) }}
	return mgr, renew, nil
}

// tlsDirOf is where an agent keeps its TLS files.
func tlsDirOf(dataDir string) tlsdir.Dir { return tlsdir.Dir(filepath.Join(dataDir, "tls")) }

// joinWithRetry joins, waiting while no manager can be reached (it may be
// starting) until ctx ends; a refusal is returned at once.
func joinWithRetry(ctx context.Context, addrs []string, token string, req client.JoinRequest, out io.Writer) (*client.Joined, error) {
	said := false
	wait := 100 * time.Millisecond
	return client.JoinRetrying(ctx, addrs, token, req, func(err error) time.Duration {
		if !said {
			fmt.Fprintf(out, "shoal: waiting for a manager to answer the join (%v); retrying\n", err)
			said = true
		}
		wait = min(2*wait, 5*time.Second)
		return wait
	})
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
