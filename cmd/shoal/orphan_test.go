package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
)

// With a short orphan timeout, an agent frozen until its node is down
// keeps its tasks' addresses held (the node never confirmed them stopped),
// so their replacements wait on the full /29; once the node has
// been down for the orphan timeout the leader orphans it, its tasks are
// orphaned (and reaped) and the replacements get the freed addresses and
// run on the other node — no sooner than the timeout, and within 3× it.
func TestOrphanTimeoutFreesAFrozenNodesAddresses(t *testing.T) {
	const orphan = 6 * time.Second
	api, _, agents := oneManager(t, 2, "--sync-interval", "2s", "--min-heartbeat", "1s", "--failover-grace", "0",
		"--orphan-timeout", orphan.String())
	c, err := client.New(api)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes := func() map[uint32]client.Node {
		l, _, err := c.Nodes(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[uint32]client.Node{}
		for _, n := range l.Items {
			m[n.ID] = n
		}
		return m
	}
	waitFor(t, 30*time.Second, "two nodes ready", func() (bool, string) {
		ns := nodes()
		ready := 0
		for _, n := range ns {
			if n.Status == "ready" {
				ready++
			}
		}
		return ready == 2, fmt.Sprintf("%+v", ns)
	})

	const marker = "sleep 7783"
	killLeftovers(t, marker)
	cli(t, api, "network", "create", "net", "--subnet", "10.9.0.0/29") // the VIP and four tasks
	cli(t, api, "service", "create", "fill", "--replicas", "4", "--network", "net", "--restart-delay", "0s", "--detach", "--", "sleep", "7783")
	var rows []taskRow
	waitFor(t, 30*time.Second, "4 running", func() (bool, string) {
		rows = psJSON(t, api, "fill")
		return countState(rows, "running") == 4, fmt.Sprintf("%+v", rows)
	})
	if nw, err := c.Network(ctx, "net"); err != nil || nw.Free != 0 {
		t.Fatalf("network: %+v, %v; want it full", nw, err)
	}

	frozen := rows[0].Node
	var lost []string
	for _, r := range rows {
		if r.Node == frozen {
			lost = append(lost, r.ID)
		}
	}
	agent := agents[nodes()[frozen].Name]
	if err := agent.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.cmd.Process.Signal(syscall.SIGCONT) })
	var downAt time.Time
	waitFor(t, 30*time.Second, "frozen node down", func() (bool, string) {
		n := nodes()[frozen]
		downAt = n.StatusSince
		return n.Status == "down", fmt.Sprintf("%+v", n)
	})
	// Before the timeout the replacements wait: the frozen node's tasks
	// still hold their addresses.
	waitFor(t, 10*time.Second, "replacements waiting on the full network", func() (bool, string) {
		rows = psJSON(t, api, "fill")
		waiting := 0
		for _, r := range rows {
			if r.State == "new" && r.Desired == "running" && strings.Contains(r.Message, "waiting for an address") {
				waiting++
			}
		}
		return waiting == len(lost), fmt.Sprintf("%+v", rows)
	})
	if early := time.Since(downAt); early >= orphan {
		t.Fatalf("the replacements were first seen waiting %s after the node went down, past the %s timeout: too late to tell", early, orphan)
	}
	// Past the timeout: the frozen node's tasks are gone (orphaned, then
	// reaped) and the replacements run with the freed addresses.
	waitFor(t, 3*orphan, "replacements running", func() (bool, string) {
		rows = psJSON(t, api, "fill")
		for _, r := range rows {
			if slices.Contains(lost, r.ID) {
				return false, fmt.Sprintf("task %s of the frozen node is still there: %+v", r.ID, rows)
			}
		}
		return countState(rows, "running") == 4, fmt.Sprintf("%+v", rows)
	})
	var freed time.Time // when the first replacement got its address
	for _, r := range rows {
		if r.Node == frozen {
			t.Fatalf("task %s runs on the frozen node", r.ID)
		}
		task, err := c.Task(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range task.History {
			if h.State == "pending" && h.At.After(downAt) && (freed.IsZero() || h.At.Before(freed)) {
				freed = h.At
			}
		}
	}
	held := freed.Sub(downAt)
	fmt.Printf("orphan timeout %s: node down at %s, replacements got freed addresses %s later\n",
		orphan, downAt.Format("15:04:05.000"), held.Round(time.Millisecond))
	if held < orphan || held > 3*orphan {
		t.Fatalf("addresses freed %s after the node went down, want the %s orphan timeout (at most 3× it)", held, orphan)
	}
}
