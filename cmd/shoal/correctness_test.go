package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
)

// The task model through the built binary, as a user sees it: one
// manager (heartbeats at least 1 s apart, so a silent node is down after
// about 3 s; no failover grace) and two agents running real processes.
//   - A failing rolling update (parallelism 1, delay 1 s, pause) moves
//     exactly one slot: the other two keep their old processes, and
//     `service ls` says so.
//   - A node that goes silent has its task replaced on the other node
//     within the restart delay and a few seconds, not after a minute.
//   - A task assigned to a node that is already silent (it never started
//     there) is lost at once and replaced; when the node comes back no
//     process starts for it, and the replacement keeps running.
//
// Times are asserted with at least 3× margin and printed.
func TestTaskModelThroughTheBinary(t *testing.T) {
	api, _, agents := oneManager(t, 2, "--sync-interval", "2s", "--min-heartbeat", "1s", "--failover-grace", "0")
	c, err := client.New(api)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes := func() map[string]client.Node {
		l, _, err := c.Nodes(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]client.Node{}
		for _, n := range l.Items {
			m[n.Name] = n
		}
		return m
	}
	tasks := func(service string) []client.Task {
		l, _, err := c.Tasks(ctx, &client.Query{Params: url.Values{"service": {service}}})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	freeze := func(name string) func() {
		p := agents[name]
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		thaw := func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }
		t.Cleanup(thaw)
		return thaw
	}

	t.Run("a failing rolling update moves one slot", func(t *testing.T) {
		const marker = "sleep 7791"
		killLeftovers(t, marker)
		cli(t, api, "service", "create", "roll", "--replicas", "3", "--detach", "--", "sleep", "7791")
		waitFor(t, 30*time.Second, "3 running", func() (bool, string) {
			rows := psJSON(t, api, "roll")
			return countState(rows, "running") == 3, fmt.Sprintf("%+v", rows)
		})
		cli(t, api, "service", "update", "roll", "--update-parallelism", "1", "--update-delay", "1s",
			"--update-failure-action", "pause", "--detach", "--", "sh", "-c", "exit 3")
		var svc client.Service
		waitFor(t, 30*time.Second, "the update paused", func() (bool, string) {
			svc, _, err = c.Service(ctx, "roll", nil)
			return err == nil && svc.Update.State == "paused", fmt.Sprintf("%+v, %v", svc.Update, err)
		})
		slots := map[uint32]bool{}
		oldRunning := 0
		for _, tk := range tasks("roll") {
			if tk.SpecVersion == 2 {
				slots[tk.Slot] = true
			}
			if tk.SpecVersion == 1 && tk.State == "running" && tk.Desired == "running" {
				oldRunning++
			}
		}
		pids := len(pidsOf(marker))
		fmt.Printf("failing update paused: %d slot(s) got v2, %d old tasks running, %d old processes\n", len(slots), oldRunning, pids)
		if len(slots) != 1 || oldRunning != 2 || pids != 2 {
			t.Fatalf("after the failing update paused: slots at v2 %v, %d old tasks running, %d old processes; want 1, 2, 2",
				slots, oldRunning, pids)
		}
		if ls := cli(t, api, "service", "ls"); !strings.Contains(ls, "2/3 (0 at v2, update paused)") {
			t.Fatalf("service ls does not show the old tasks running beside the paused update:\n%s", ls)
		}
		cli(t, api, "service", "rm", "roll")
	})

	t.Run("a silent node's task is replaced within the restart delay", func(t *testing.T) {
		const marker, restartDelay = "sleep 7792", 5 * time.Second
		killLeftovers(t, marker)
		cli(t, api, "service", "create", "lost", "--replicas", "2", "--detach", "--", "sleep", "7792")
		waitFor(t, 30*time.Second, "2 running", func() (bool, string) {
			rows := psJSON(t, api, "lost")
			return countState(rows, "running") == 2, fmt.Sprintf("%+v", rows)
		})
		var gone client.Task
		for _, tk := range tasks("lost") {
			if tk.NodeName == "node-1" {
				gone = tk
			}
		}
		if gone.ID == "" {
			t.Fatalf("no task on node-1: %+v", tasks("lost"))
		}
		thaw := freeze("node-1")
		var downAt time.Time
		waitFor(t, 30*time.Second, "node-1 down", func() (bool, string) {
			n := nodes()["node-1"]
			downAt = n.StatusSince
			return n.Status == "down", fmt.Sprintf("%+v", n)
		})
		var ranAt time.Time
		waitFor(t, 3*(restartDelay+3*time.Second), "the slot's replacement running on node-2", func() (bool, string) {
			for _, tk := range tasks("lost") {
				if tk.Slot == gone.Slot && tk.ID != gone.ID && tk.State == "running" && tk.NodeName == "node-2" {
					ranAt = tk.Since
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", tasks("lost"))
		})
		took := ranAt.Sub(downAt)
		fmt.Printf("silent node: down at %s, its slot's replacement running %s later (restart delay %s)\n",
			downAt.Format("15:04:05.000"), took.Round(time.Millisecond), restartDelay)
		if took > 3*(restartDelay+3*time.Second) {
			t.Fatalf("the replacement ran %s after the node went down; want within the restart delay + 3s (3× margin)", took)
		}
		thaw()
		waitFor(t, 30*time.Second, "node-1 ready again", func() (bool, string) {
			n := nodes()["node-1"]
			return n.Status == "ready", fmt.Sprintf("%+v", n)
		})
		cli(t, api, "service", "rm", "lost")
		waitFor(t, 30*time.Second, "the processes gone", func() (bool, string) {
			return len(pidsOf(marker)) == 0, fmt.Sprint(pidsOf(marker))
		})
	})

	t.Run("a task that never started on a silent node is lost at once", func(t *testing.T) {
		const marker = "sleep 7793"
		killLeftovers(t, marker)
		drain, active := "drain", "active"
		n2 := fmt.Sprint(nodes()["node-2"].ID)
		if _, err := c.UpdateNode(ctx, n2, client.NodeUpdate{Availability: &drain}); err != nil {
			t.Fatal(err)
		}
		thaw := freeze("node-1")
		replicas, noDelay := uint32(1), client.Duration(0)
		_, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "pend", Replicas: &replicas, Command: []string{"sleep", "7793"},
			Restart:    &client.RestartPolicy{Delay: &noDelay},
			Disconnect: &client.Disconnect{LostAfter: client.Duration(time.Minute), Reconcile: "keep_original"}})
		if err != nil {
			t.Fatal(err)
		}
		var orig client.Task
		waitFor(t, 10*time.Second, "the task assigned to the silent node-1", func() (bool, string) {
			for _, tk := range tasks("pend") {
				if tk.NodeName == "node-1" && tk.State == "assigned" {
					orig = tk
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", tasks("pend"))
		})
		if n := nodes()["node-1"]; n.Status != "ready" {
			t.Skipf("node-1 was %s before its task was assigned; the scenario needs it still ready then", n.Status)
		}
		if _, err := c.UpdateNode(ctx, n2, client.NodeUpdate{Availability: &active}); err != nil {
			t.Fatal(err)
		}
		var silentAt time.Time
		waitFor(t, 30*time.Second, "node-1 disconnected", func() (bool, string) {
			n := nodes()["node-1"]
			silentAt = n.StatusSince
			return n.Status == "disconnected" || n.Status == "down", fmt.Sprintf("%+v", n)
		})
		var repl client.Task
		waitFor(t, 20*time.Second, "a replacement running on node-2", func() (bool, string) {
			for _, tk := range tasks("pend") {
				if tk.ID != orig.ID && tk.NodeName == "node-2" && tk.State == "running" {
					repl = tk
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", tasks("pend"))
		})
		fmt.Printf("never-started task on a silent node: replacement running %s after the node went silent (its window is 1m)\n",
			repl.Since.Sub(silentAt).Round(time.Millisecond))
		thaw()
		waitFor(t, 30*time.Second, "node-1 back and the lost original stopped or gone", func() (bool, string) {
			if nodes()["node-1"].Status != "ready" {
				return false, fmt.Sprintf("%+v", nodes()["node-1"])
			}
			for _, tk := range tasks("pend") {
				if tk.ID == orig.ID {
					return tk.State != "assigned" && tk.Desired != "running", fmt.Sprintf("original %+v", tk)
				}
			}
			return true, ""
		})
		for _, tk := range tasks("pend") {
			if tk.ID == orig.ID && (tk.State == "running" || tk.Desired == "running") {
				t.Fatalf("the lost original came back: %+v", tk)
			}
			if tk.ID == repl.ID && (tk.State != "running" || tk.Desired != "running") {
				t.Fatalf("the replacement was stopped at reconnect: %+v", tk)
			}
		}
		if pids := pidsOf(marker); len(pids) != 1 {
			t.Fatalf("%d processes of the service after node-1 came back; want only the replacement's", len(pids))
		}
		cli(t, api, "service", "rm", "pend")
	})
}
