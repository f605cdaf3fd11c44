package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/api/client"
)

// TestFailoverTimes measures, with three `shoal serve` processes, how long
// every group goes without a leader after kill -9 of the replica leading
// the cluster group, how long one fresh replica takes to be ready, and the
// longest write gap while each replica in turn is stopped with SIGTERM
// (leadership handed over) and started again. It prints the figures; it
// runs with SHOAL_PERF_FAILOVER=1 (make perf-failover), since it times a
// loaded machine rather than checking behaviour.
func TestFailoverTimes(t *testing.T) {
	if os.Getenv("SHOAL_PERF_FAILOVER") == "" {
		t.Skip("a measurement: SHOAL_PERF_FAILOVER=1 (make perf-failover)")
	}
	root := t.TempDir()
	shoalBin(t) // built before the clock starts

	// One replica alone: start to ready.
	t0 := time.Now()
	solo := startProc(t, "solo", "serve", "--api-addr", freeAddr(t), "--data-dir", filepath.Join(root, "solo"), "--insecure")
	waitFor(t, 30*time.Second, "solo ready", func() (bool, string) {
		return strings.Contains(solo.out.String(), "shoal: ready"), solo.out.String()
	})
	fmt.Printf("failover: one replica: start to ready %s\n", time.Since(t0).Round(time.Millisecond))
	solo.stop(t)

	var rafts, apis, peers []string
	for i := 1; i <= 3; i++ {
		rafts, apis = append(rafts, freeAddr(t)), append(apis, freeAddr(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i, rafts[i-1]))
	}
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = startProc(t, fmt.Sprintf("serve-%d", i+1), "serve", "--id", fmt.Sprint(i+1),
			"--raft-addr", rafts[i], "--api-addr", apis[i], "--peers", strings.Join(peers, ","),
			"--data-dir", filepath.Join(root, fmt.Sprintf("m%d", i+1)), "--insecure")
	}
	ready := func(p *proc, n int) {
		t.Helper()
		waitFor(t, 60*time.Second, p.name+" ready", func() (bool, string) {
			return strings.Count(p.out.String(), "shoal: ready") >= n, p.out.String()
		})
	}
	for _, p := range procs {
		ready(p, 1)
	}
	clients := make([]*client.Client, 3)
	for i := range clients {
		var err error
		if clients[i], err = client.New(apis[i]); err != nil {
			t.Fatal(err)
		}
	}

	// A writer: network creates (they reach every group) through a replica
	// that stays up, each bounded so a stuck one does not hide the rest.
	var gaps struct {
		sync.Mutex
		last time.Time
		max  time.Duration
	}
	var via atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := clients[via.Load()].CreateNetwork(ctx, client.NetworkSpec{
				Name: fmt.Sprintf("n%d", n), Subnet: fmt.Sprintf("10.%d.%d.0/24", n/256%256, n%256)})
			cancel()
			if err == nil {
				now := time.Now()
				gaps.Lock()
				if !gaps.last.IsZero() {
					gaps.max = max(gaps.max, now.Sub(gaps.last))
				}
				gaps.last = now
				gaps.Unlock()
			}
		}
	}()
	resetGap := func() {
		gaps.Lock()
		gaps.last, gaps.max = time.Now(), 0
		gaps.Unlock()
	}
	maxGap := func() time.Duration {
		gaps.Lock()
		defer gaps.Unlock()
		return gaps.max
	}
	defer func() { close(stop); wg.Wait() }()

	// Rolling restart: SIGTERM (hand over, stop), start again, next.
	var worst time.Duration
	for i, p := range procs {
		via.Store(int32((i + 1) % 3))
		resetGap()
		p.stop(t)
		if testing.Verbose() {
			fmt.Print(p.out.String())
		}
		p.start(t)
		ready(p, 1)
		g := maxGap()
		worst = max(worst, g)
		fmt.Printf("failover: rolling restart: replica %d: longest write gap %s\n", i+1, g.Round(time.Millisecond))
	}
	fmt.Printf("failover: rolling restart: worst write gap %s\n", worst.Round(time.Millisecond))

	// kill -9 of the cluster group's leader: until a survivor knows a
	// live leader for every group.
	st, err := clients[0].Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dead := int(st.Groups[0].Leader) - 1
	survivor := (dead + 1) % 3
	via.Store(int32(survivor))
	resetGap()
	t0 = time.Now()
	procs[dead].kill()
	sample := time.NewTicker(10 * time.Millisecond) // the resolution of the figures
	defer sample.Stop()
	var led time.Duration
	for led == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		st, err := clients[survivor].Status(ctx)
		cancel()
		if err == nil && !slices.ContainsFunc(st.Groups, func(g client.GroupStatus) bool {
			return g.Leader == 0 || int(g.Leader) == dead+1
		}) {
			led = time.Since(t0)
		} else if time.Since(t0) > 30*time.Second {
			t.Fatalf("no leaders 30s after the kill: %+v %v", st, err)
		}
		<-sample.C
	}
	fmt.Printf("failover: kill -9 of the leader: every group led again after %s\n", led.Round(time.Millisecond))
	// The gap ends with the first write after every group is led again.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		gaps.Lock()
		after := gaps.last.After(t0.Add(led))
		gaps.Unlock()
		if after {
			break
		}
		<-sample.C
	}
	fmt.Printf("failover: kill -9 of the leader: longest write gap %s\n", maxGap().Round(time.Millisecond))
}
