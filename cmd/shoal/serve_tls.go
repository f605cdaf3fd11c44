package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/api/client"
	"shoal/engine"
	"shoal/manager"
	"shoal/security"
	"shoal/security/tlsdir"
)

// tlsDirOf is where a manager or an agent keeps its TLS files.
func tlsDirOf(dataDir string) tlsdir.Dir { return tlsdir.Dir(filepath.Join(dataDir, "tls")) }

// managerFiles are the files a manager's TLS directory must hold.
var managerFiles = []string{tlsdir.RootCert, tlsdir.RootKey, tlsdir.ManagersCert, tlsdir.ManagersKey, tlsdir.Tokens,
	tlsdir.Node + ".crt", tlsdir.Node + ".key"}

// prepareServeTLS returns this replica's security material: read from
// DATA-DIR/tls, created there (the first manager of a cluster), or
// obtained with --join and --token (the others). Nil with --dev or
// --insecure.
func prepareServeTLS(ctx context.Context, o serveOptions, peers map[uint64]string, member bool, out io.Writer) (*manager.TLS, error) {
	dir := tlsDirOf(o.dataDir)
	if o.dev || o.insecure {
		switch {
		case o.dev && o.join != "":
			return nil, errors.New("--dev runs a one-replica cluster; --join is for a replica of a cluster (start it with --insecure or with TLS)")
		case o.tokenFlag:
			return nil, errors.New("--token is the TLS join token; without TLS (--insecure) --join needs no token")
		case !o.dev && dir.Has(tlsdir.RootCert):
			return nil, fmt.Errorf("%s was created with TLS; start it without --insecure", o.dataDir)
		}
		return nil, nil
	}
	if !dir.Has(managerFiles...) {
		if _, err := os.Stat(filepath.Join(o.dataDir, "raft")); err == nil {
			return nil, fmt.Errorf("%s belongs to a replica started with --insecure: start it with --insecure again (TLS cannot be added to an existing cluster)", o.dataDir)
		}
		if o.join == "" && o.token != "" {
			return nil, errors.New("--token needs --join: the API address of a running manager of the cluster")
		}
		// Refuse bad flags and busy ports before anything is written.
		if err := engine.Check(engine.Config{DataDir: o.dataDir, ReplicaID: o.id, RaftAddr: o.raftAddr, Peers: peers,
			Join: member, Groups: o.groups, RaftLogLevel: o.raftLogLevel}); err != nil {
			return nil, err
		}
		if err := probeBind(o.apiAddr); err != nil {
			return nil, err
		}
		raftAddr := o.raftAddr
		if raftAddr == "" {
			raftAddr = peers[o.id]
		}
		if o.join != "" {
			if err := joinAsManager(ctx, o, raftAddr, member, dir, out); err != nil {
				return nil, err
			}
		} else {
			if first := firstReplica(peers); first != 0 && first != o.id {
				return nil, fmt.Errorf("replica %d: the cluster CA is created by the first replica (%d, the lowest ID in --peers); "+
					"start this one with --join <API address of a running manager> --token <manager token> "+
					"(print it there with `shoal token manager`), or start every replica with --insecure", o.id, first)
			}
			if err := bootstrapCA(o, raftAddr, dir, out); err != nil {
				return nil, err
			}
		}
	}
	ca, err := dir.CA()
	if err != nil {
		return nil, err
	}
	cert, err := dir.Pair(tlsdir.Node)
	if err != nil {
		return nil, err
	}
	tokens, err := dir.OpenTokens()
	if err != nil {
		return nil, err
	}
	return &manager.TLS{CA: ca, Cert: cert, Tokens: tokens, WorkerLifetime: o.nodeCertTTL,
		RaftCAFile: dir.Path(tlsdir.ManagersCert), RaftCertFile: dir.Path(tlsdir.Node + ".crt"),
		RaftKeyFile: dir.Path(tlsdir.Node + ".key")}, nil
}

func probeBind(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("API address %s: %w", addr, err)
	}
	return ln.Close()
}

// firstReplica is the lowest ID in peers (0 when this replica is alone).
func firstReplica(peers map[uint64]string) uint64 {
	if len(peers) < 2 {
		return 0
	}
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	return slices.Min(ids)
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// bootstrapCA creates the cluster: its CA, this replica's certificate, an
// admin credential and the join secrets.
func bootstrapCA(o serveOptions, raftAddr string, dir tlsdir.Dir, out io.Writer) error {
	now := time.Now()
	ca, err := security.NewCA(rand.Reader, now)
	if err != nil {
		return err
	}
	issue := func(pair string, req security.Request) error {
		key, err := security.NewKey(rand.Reader)
		if err != nil {
			return err
		}
		req.Key = &key.PublicKey
		chain, err := ca.Issue(rand.Reader, req, now)
		if err != nil {
			return err
		}
		return dir.WritePairKey(pair, security.CertPEM(chain...), key)
	}
	files, err := ca.Files()
	if err != nil {
		return err
	}
	var sec security.Secrets
	if sec.Worker, err = security.NewSecret(rand.Reader); err != nil {
		return err
	}
	if sec.Manager, err = security.NewSecret(rand.Reader); err != nil {
		return err
	}
	if err := errors.Join(dir.WriteCA(files),
		issue(tlsdir.Node, security.Request{Role: security.RoleManager, Name: strconv.FormatUint(o.id, 10),
			Hosts: []string{hostOf(raftAddr), hostOf(o.apiAddr)}}),
		issue(tlsdir.Admin, security.Request{Role: security.RoleAdmin, Name: "admin"})); err != nil {
		return err
	}
	if _, err := dir.CreateTokens(sec); err != nil {
		return err
	}
	fmt.Fprintf(out, "shoal: TLS: created the cluster CA in %s (cluster %s, CA digest %s)\n", dir, ca.ClusterID, ca.Digest())
	fmt.Fprintf(out, "shoal: TLS: admin credentials for the CLI: --tls-dir %s (or SHOAL_TLS_DIR); join tokens: `shoal token worker` and `shoal token manager`\n", dir)
	return nil
}

// joinAsManager obtains this replica's certificate and the cluster
// authority from a running manager, before Raft starts.
func joinAsManager(ctx context.Context, o serveOptions, raftAddr string, member bool, dir tlsdir.Dir, out io.Writer) error {
	if o.token == "" {
		return errors.New("--join needs --token: the manager token (print it on a running manager with `shoal token manager`)")
	}
	req := client.JoinRequest{Role: string(security.RoleManager), Replica: o.id, RaftAddr: raftAddr, APIAddr: o.apiAddr, Member: member}
	j, err := joinWithRetry(ctx, splitAddrs(o.join), o.token, req, out)
	if err != nil {
		return err
	}
	kit := j.Answer.Manager
	if kit == nil {
		return errors.New("the manager answered the join without the cluster authority; is it a Shoal manager of this version?")
	}
	if err := errors.Join(
		dir.WriteCA(security.CAFiles{Root: []byte(j.Answer.CA), RootKey: []byte(kit.RootKey),
			Managers: []byte(kit.ManagersCA), ManagersKey: []byte(kit.ManagersKey)}),
		dir.WritePairKey(tlsdir.Node, []byte(j.Answer.Cert), j.Key),
		dir.WritePair(tlsdir.Admin, []byte(kit.AdminCert), []byte(kit.AdminKey))); err != nil {
		return err
	}
	w, err1 := security.ParseSecret(kit.WorkerSecret)
	m, err2 := security.ParseSecret(kit.ManagerSecret)
	if err := errors.Join(err1, err2); err != nil {
		return errors.New("the manager answered the join with malformed join secrets")
	}
	if _, err := dir.CreateTokens(security.Secrets{Worker: w, Manager: m}); err != nil {
		return err
	}
	if _, err := dir.CA(); err != nil {
		return err
	}
	if member {
		fmt.Fprintf(out, "shoal: joined the cluster as replica %d (Raft %s): added to every group\n", o.id, raftAddr)
	}
	fmt.Fprintf(out, "shoal: TLS: joined the cluster; credentials in %s\n", dir)
	return nil
}

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
