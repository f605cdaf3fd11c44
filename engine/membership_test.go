package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/freeport"
)

// openJoined starts replica id in a fresh directory with Join, after the
// cluster added it.
func openJoined(t *testing.T, cfg Config, id uint64, addr string) *Engine {
	t.Helper()
	cfg.DataDir, cfg.ReplicaID, cfg.RaftAddr, cfg.Join = filepath.Join(t.TempDir(), fmt.Sprint("joined-", id)), id, addr, true
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// waitMembers waits until e has applied members as every group's
// membership.
func waitMembers(t *testing.T, e *Engine, ids ...uint64) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, gm := range e.Membership() {
			if got := slices.Sorted(maps.Keys(gm.Members)); !slices.Equal(got, ids) {
				return false, fmt.Sprintf("replica %d: group %d members %v, want %v", e.ReplicaID(), gm.Group, got, ids)
			}
		}
		return true, ""
	})
}

// A replica started with no peers joins a running one-replica cluster:
// every group gains it, it catches up with the state written before, and
// it survives a restart with nothing but its data directory. Then it is
// removed, and its ID cannot come back.
func TestJoinAndRemoveReplica(t *testing.T) {
	cfg := testConfig(2)
	l := startLocal(t, 1, cfg)
	e1 := l.Engine(1)
	submitAll(t, e1, append(addNodes(3), createServices("web", 4, 2)...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	addr2, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.AddReplica(ctx, 2, addr2); err != nil {
		t.Fatal(err)
	}
	// Retried (a lost answer): nothing changes.
	if err := e1.AddReplica(ctx, 2, addr2); err != nil {
		t.Fatalf("repeated add: %v", err)
	}
	e2 := openJoined(t, cfg, 2, addr2)
	waitMembers(t, e1, 1, 2)
	waitMembers(t, e2, 1, 2)
	converged(t, []*Engine{e1, e2})
	submitAll(t, e2, createServices("after", 2, 1))
	converged(t, []*Engine{e1, e2})

	// Refused input, with the reason.
	for _, c := range []struct {
		id   uint64
		addr string
		want string
	}{
		{2, "127.0.0.1:1", "replica 2 is already a member"},
		{3, addr2, "already belongs to replica 2"},
		{0, "127.0.0.1:1", "1 or more"},
		{3, "nohost", "not host:port"},
	} {
		err := e1.AddReplica(ctx, c.id, c.addr)
		if !errors.Is(err, ErrMembership) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("add %d at %s: %v, want ErrMembership saying %q", c.id, c.addr, err, c.want)
		}
	}
	if err := e1.RemoveReplica(ctx, 7); !errors.Is(err, ErrNoReplica) {
		t.Errorf("remove a non-member: %v, want ErrNoReplica", err)
	}

	// A restart of the joined replica needs no flags: Join is recorded.
	dir := e2.cfg.DataDir
	e2.Close()
	rcfg := cfg
	rcfg.DataDir, rcfg.ReplicaID = dir, 2
	e2, err = Open(rcfg)
	if err != nil {
		t.Fatalf("restart of the joined replica: %v", err)
	}
	t.Cleanup(e2.Close)
	if !e2.cfg.Join {
		t.Fatal("the restarted replica did not pick up Join from its data directory")
	}
	converged(t, []*Engine{e1, e2})

	// Remove replica 2: replica 1 alone again, and 2 can never rejoin.
	if err := e1.RemoveReplica(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, e1, 1)
	e2.Close() // a removed replica is stopped
	submitAll(t, e1, createServices("alone", 1, 1))
	if err := e1.RemoveReplica(ctx, 1); !errors.Is(err, ErrMembership) || !strings.Contains(err.Error(), "only member") {
		t.Errorf("remove the last replica: %v, want ErrMembership saying it is the only member", err)
	}
	short, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if err := e1.AddReplica(short, 2, addr2); !errors.Is(err, ErrMembership) || !strings.Contains(err.Error(), "another --id") {
		t.Errorf("re-adding a removed ID: %v, want ErrMembership asking for another --id", err)
	}
}
