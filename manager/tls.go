package manager

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"shoal/api/client"
	"shoal/engine"
	"shoal/security"
	"shoal/security/tlsdir"
)

// tlsDirOf is where a manager keeps its TLS files.
func tlsDirOf(dataDir string) tlsdir.Dir { return tlsdir.Dir(filepath.Join(dataDir, "tls")) }

// managerFiles are the files a manager's TLS directory must hold.
var managerFiles = []string{tlsdir.RootCert, tlsdir.RootKey, tlsdir.ManagersCert, tlsdir.ManagersKey, tlsdir.Tokens,
	tlsdir.Node + ".crt", tlsdir.Node + ".key"}

// prepareTLS returns this replica's security material: read from
// DATA-DIR/tls, created there (the first manager of a cluster), or
// obtained with the join addresses and token (the others). Nil in dev mode
// or insecure.
func prepareTLS(ctx context.Context, o ServeOptions, member bool, sayf func(string, ...any)) (*TLS, error) {
	dir := tlsDirOf(o.DataDir)
	if o.Dev || o.Insecure {
		switch {
		case o.Dev && len(o.JoinAddrs) > 0:
			return nil, errors.New("--dev runs a one-replica cluster; --join is for a replica of a cluster (start it with --insecure or with TLS)")
		case o.TokenGiven:
			return nil, errors.New("--token is the TLS join token; without TLS (--insecure) --join needs no token")
		case !o.Dev && dir.Has(tlsdir.RootCert):
			return nil, fmt.Errorf("%s was created with TLS; start it without --insecure", o.DataDir)
		}
		return nil, nil
	}
	if !dir.Has(managerFiles...) {
		if _, err := os.Stat(filepath.Join(o.DataDir, "raft")); err == nil {
			return nil, fmt.Errorf("%s belongs to a replica started with --insecure: start it with --insecure again (TLS cannot be added to an existing cluster)", o.DataDir)
		}
		if len(o.JoinAddrs) == 0 && o.Token != "" {
			return nil, errors.New("--token needs --join: the API address of a running manager of the cluster")
		}
		// Refuse bad flags and busy ports before anything is written.
		if err := engine.Check(engine.Config{DataDir: o.DataDir, ReplicaID: o.ReplicaID, RaftAddr: o.RaftAddr, Peers: o.Peers,
			Join: member, Groups: o.Groups, RaftLogLevel: o.RaftLogLevel}); err != nil {
			return nil, err
		}
		if err := probeBind(o.APIAddr); err != nil {
			return nil, err
		}
		raftAddr := o.RaftAddr
		if raftAddr == "" {
			raftAddr = o.Peers[o.ReplicaID]
		}
		if len(o.JoinAddrs) > 0 {
			if err := joinAsManager(ctx, o, raftAddr, member, dir, sayf); err != nil {
				return nil, err
			}
		} else {
			if first := firstReplica(o.Peers); first != 0 && first != o.ReplicaID {
				return nil, fmt.Errorf("replica %d: the cluster CA is created by the first replica (%d, the lowest ID in --peers); "+
					"start this one with --join <API address of a running manager> --token <manager token> "+
					"(print it there with `shoal token manager`), or start every replica with --insecure", o.ReplicaID, first)
			}
			if err := bootstrapCA(o, raftAddr, dir, sayf); err != nil {
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
	return &TLS{CA: ca, Cert: cert, Tokens: tokens, WorkerLifetime: o.WorkerLifetime,
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
func bootstrapCA(o ServeOptions, raftAddr string, dir tlsdir.Dir, sayf func(string, ...any)) error {
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
		issue(tlsdir.Node, security.Request{Role: security.RoleManager, Name: strconv.FormatUint(o.ReplicaID, 10),
			Hosts: []string{hostOf(raftAddr), hostOf(o.APIAddr)}}),
		issue(tlsdir.Admin, security.Request{Role: security.RoleAdmin, Name: "admin"})); err != nil {
		return err
	}
	if _, err := dir.CreateTokens(sec); err != nil {
		return err
	}
	sayf("TLS: created the cluster CA in %s (cluster %s, CA digest %s)", dir, ca.ClusterID, ca.Digest())
	sayf("TLS: admin credentials for the CLI: --tls-dir %s (or SHOAL_TLS_DIR); join tokens: `shoal token worker` and `shoal token manager`", dir)
	return nil
}

// joinAsManager obtains this replica's certificate and the cluster
// authority from a running manager, before Raft starts.
func joinAsManager(ctx context.Context, o ServeOptions, raftAddr string, member bool, dir tlsdir.Dir, sayf func(string, ...any)) error {
	if o.Token == "" {
		return errors.New("--join needs --token: the manager token (print it on a running manager with `shoal token manager`)")
	}
	req := client.JoinRequest{Role: string(security.RoleManager), Replica: o.ReplicaID, RaftAddr: raftAddr, APIAddr: o.APIAddr, Member: member, Groups: joinGroups(o)}
	said := false
	wait := 100 * time.Millisecond
	// Wait while no manager can be reached (it may be starting); a
	// refusal is final.
	j, err := client.JoinRetrying(ctx, o.JoinAddrs, o.Token, req, func(err error) time.Duration {
		if !said {
			sayf("waiting for a manager to answer the join (%v); retrying", err)
			said = true
		}
		wait = min(2*wait, 5*time.Second)
		return wait
	})
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
		sayf("joined the cluster as replica %d (Raft %s): added to every group", o.ReplicaID, raftAddr)
	}
	sayf("TLS: joined the cluster; credentials in %s", dir)
	return nil
}
