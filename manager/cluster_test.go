package manager

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/engine"
	"shoal/internal/freeport"
)

// cluster is n manager replicas in this process on free loopback ports.
type cluster struct {
	t     *testing.T
	root  string
	peers map[uint64]string
	ms    []*Manager // index: replica ID - 1; nil while stopped
}

func freeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func startCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, root: t.TempDir(), peers: map[uint64]string{}, ms: make([]*Manager, n)}
	for id := uint64(1); id <= uint64(n); id++ {
		c.peers[id] = freeAddr(t)
	}
	for id := uint64(1); id <= uint64(n); id++ {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, m := range c.ms {
			if m != nil {
				m.Close()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, m := range c.ms {
		if err := m.Register(ctx); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	return c
}

// startThree is startCluster(t, 3), skipped with -short.
func startThree(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("three replicas")
	}
	return startCluster(t, 3)
}

// start (re)starts replica id from its data directory.
func (c *cluster) start(id uint64) {
	m, err := Start(Options{DataDir: filepath.Join(c.root, fmt.Sprint(id)), ReplicaID: id, RaftAddr: c.peers[id],
		Peers: c.peers, Groups: 2, RaftLogLevel: "critical", APIAddr: "127.0.0.1:0",
		Engine: engine.Config{RTT: 20 * time.Millisecond, HeartbeatRTT: 3, ElectionRTT: 40}})
	if err != nil {
		c.t.Fatalf("start replica %d: %v", id, err)
	}
	c.ms[id-1] = m
}

func (c *cluster) stop(id uint64) {
	c.ms[id-1].Close()
	c.ms[id-1] = nil
}

func (c *cluster) client(id uint64) *client.Client {
	cl, err := client.New(c.ms[id-1].APIAddr)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// leaderOf returns the replica that leads group g.
func (c *cluster) leaderOf(g int) uint64 {
	for _, m := range c.ms {
		if m != nil {
			if id, ok := m.E.Leader(g); ok {
				return id
			}
		}
	}
	return 0
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, what := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
