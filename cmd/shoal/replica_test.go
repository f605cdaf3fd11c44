package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/manager"
)

// replicaSet starts `shoal serve` replicas that join the first one by
// membership (no --peers).
type replicaSet struct {
	t     *testing.T
	root  string
	tls   bool
	token string
	apis  map[uint64]string
	procs map[uint64]*proc
}

// newReplicaSet returns an empty set whose replicas' output is logged if
// the test fails.
func newReplicaSet(t *testing.T, tls bool) *replicaSet {
	r := &replicaSet{t: t, root: t.TempDir(), tls: tls, apis: map[uint64]string{}, procs: map[uint64]*proc{}}
	t.Cleanup(func() {
		if t.Failed() {
			for id, p := range r.procs {
				t.Logf("--- replica %d\n%s", id, p.out.String())
			}
		}
	})
	return r
}

func (r *replicaSet) dir(id uint64) string { return filepath.Join(r.root, fmt.Sprint("m", id)) }

// serve starts replica id; join lists the API addresses to join (none:
// the first replica).
func (r *replicaSet) serve(id uint64, join ...string) *proc {
	r.t.Helper()
	r.apis[id] = freeAddr(r.t)
	p := r.serveIn(id, r.dir(id), r.apis[id], join...)
	r.procs[id] = p
	return p
}

// serveIn starts replica id in dir, serving its API at api.
func (r *replicaSet) serveIn(id uint64, dir, api string, join ...string) *proc {
	r.t.Helper()
	if r.tls {
		cliTLSDirs.Store(api, filepath.Join(r.dir(1), "tls"))
	}
	args := []string{"serve", "--id", fmt.Sprint(id), "--raft-addr", freeAddr(r.t), "--api-addr", api,
		"--data-dir", dir, "--groups", "2", "--raft-log-level", "critical",
		"--status-file", filepath.Join(dir + ".status.json")}
	if !r.tls {
		args = append(args, "--insecure")
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
		if r.tls {
			args = append(args, "--token", r.token)
		}
	}
	return startProc(r.t, fmt.Sprint("serve-", id, "-", filepath.Base(dir)), args...)
}

func (r *replicaSet) ready(id uint64) {
	r.t.Helper()
	p := r.procs[id]
	waitFor(r.t, 60*time.Second, fmt.Sprintf("replica %d ready", id), func() (bool, string) {
		return strings.Contains(p.out.String(), "shoal: ready"), p.out.String()
	})
}

// members waits until the replica at api reports want as the members of
// every group, and returns its answer.
func (r *replicaSet) members(api string, want ...uint64) client.Replicas {
	r.t.Helper()
	var doc client.Replicas
	waitFor(r.t, 30*time.Second, fmt.Sprintf("members %v", want), func() (bool, string) {
		out, err := cliErr(r.t, api, "replica", "ls", "--format", "json")
		if err != nil {
			return false, out
		}
		doc = client.Replicas{}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			return false, out
		}
		if len(doc.Groups) != 3 {
			return false, out
		}
		for _, g := range doc.Groups {
			if !slices.Equal(g.Members, want) {
				return false, out
			}
		}
		return true, ""
	})
	return doc
}

// statusServices reads a replica's status file: the services its local
// state holds.
func statusServices(t *testing.T, path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var doc manager.StatusDoc
	if json.Unmarshal(b, &doc) != nil {
		return 0, false
	}
	n := 0
	for _, g := range doc.Groups {
		n += g.Services
	}
	return n, true
}

// Replicas 2 and 3 join a running one-replica TLS cluster with the manager
// token alone (no --peers); one is killed, removed, and replaced by a
// fresh replica 4 that catches up with the state; every group ends with
// three members, and a replica that joined restarts with nothing but its
// data directory.
func TestReplicaJoinRemoveReplace(t *testing.T) {
	r := newReplicaSet(t, true)
	r.serve(1)
	r.ready(1)
	r.token = strings.TrimSpace(cli(t, r.apis[1], "token", "manager", "-q"))
	r.serve(2, r.apis[1])
	r.ready(2)
	r.serve(3, r.apis[1], r.apis[2])
	r.ready(3)
	doc := r.members(r.apis[1], 1, 2, 3)
	for _, rep := range doc.Replicas {
		if rep.APIAddr != r.apis[rep.ID] {
			t.Errorf("replica %d: API %q recorded, want %q", rep.ID, rep.APIAddr, r.apis[rep.ID])
		}
	}
	cli(t, r.apis[2], "service", "create", "web", "--replicas", "2", "--detach", "--", "sleep", "1")

	// A duplicate ID at another address is refused, and the joiner exits
	// saying why.
	dup := r.serveIn(2, filepath.Join(r.root, "dup"), freeAddr(t), r.apis[1])
	select {
	case <-dup.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("a second replica 2 did not exit:\n%s", dup.out.String())
	}
	if out := dup.out.String(); !strings.Contains(out, "replica 2 is already a member") {
		t.Fatalf("duplicate replica 2: %s", out)
	}
	if out, err := cliErr(t, r.apis[1], "replica", "rm", "9"); err == nil || !strings.Contains(out, "not a member") {
		t.Fatalf("removing a non-member: %v %s", err, out)
	}

	// Replica 3's machine is lost: kill -9, remove it, replace it.
	r.procs[3].kill()
	r.members(r.apis[1], 1, 2, 3)
	cli(t, r.apis[1], "replica", "rm", "3")
	r.members(r.apis[2], 1, 2)
	r.serve(4, r.apis[1])
	r.ready(4)
	r.members(r.apis[4], 1, 2, 4)
	waitFor(t, 30*time.Second, "replica 4 holds the service", func() (bool, string) {
		n, ok := statusServices(t, r.dir(4)+".status.json")
		return ok && n == 1, fmt.Sprint(n, " services")
	})
	if out := cli(t, r.apis[4], "service", "ls"); !strings.Contains(out, "web") {
		t.Fatalf("service ls on replica 4: %s", out)
	}

	// A restart of a joined replica needs only its data directory.
	_ = r.procs[4].cmd.Process.Signal(syscall.SIGTERM)
	<-r.procs[4].exited
	p := startProc(t, "serve-4-restart", "serve", "--id", "4", "--data-dir", r.dir(4), "--api-addr", r.apis[4],
		"--raft-log-level", "critical")
	r.procs[4] = p
	r.ready(4)
	r.members(r.apis[4], 1, 2, 4)
	cli(t, r.apis[4], "service", "scale", "web=3", "--detach")
}

// Without TLS, --insecure --join adds the replica to the membership too.
func TestReplicaJoinInsecure(t *testing.T) {
	r := newReplicaSet(t, false)
	r.serve(1)
	r.ready(1)
	r.serve(2, r.apis[1])
	r.ready(2)
	r.members(r.apis[2], 1, 2)
	cli(t, r.apis[2], "service", "create", "web", "--replicas", "1", "--detach", "--", "sleep", "1")
	if out := cli(t, r.apis[1], "service", "ls"); !strings.Contains(out, "web") {
		t.Fatalf("service ls on replica 1: %s", out)
	}
	// A replica started with another --groups is refused before it is
	// added: it would never become ready, and a member that is never
	// ready costs the groups their quorum margin.
	r.apis[3] = freeAddr(t)
	p := startProc(t, "serve-3-groups", "serve", "--id", "3", "--raft-addr", freeAddr(t), "--api-addr", r.apis[3],
		"--data-dir", r.dir(3), "--groups", "4", "--insecure", "--join", r.apis[1], "--raft-log-level", "critical")
	r.procs[3] = p
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("a replica with another --groups still runs:\n%s", p.out.String())
	}
	if out := p.out.String(); p.cmd.ProcessState.ExitCode() == 0 ||
		!strings.Contains(out, "this cluster has 2 service groups and the joining replica was started with --groups 4: start it with --groups 2") {
		t.Fatalf("exit %d, want the group counts named:\n%s", p.cmd.ProcessState.ExitCode(), out)
	}
	r.members(r.apis[1], 1, 2)
}
