package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// leaderIndex returns which manager process leads the cluster group.
func (c *testCluster) leaderIndex() int {
	c.t.Helper()
	var st struct {
		Groups []struct {
			Group  int    `json:"group"`
			Leader uint64 `json:"leader"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(cli(c.t, c.api(), "status", "--format", "json")), &st); err != nil {
		c.t.Fatal(err)
	}
	return int(st.Groups[0].Leader) - 1
}

func taskIDs(rows []taskRow, state string) []string {
	var ids []string
	for _, r := range rows {
		if r.State == state && r.Desired == "running" {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// kill -9 of the leader manager, then of an agent briefly and for longer
// than its heartbeat TTL: no task is restarted or lost by the failover, a
// status from during it arrives, a briefly killed agent re-attaches
// without duplicates, and a node that came back after its tasks were
// replaced leaves exactly one running task per slot and no stray process.
func TestClusterSurvivesKills(t *testing.T) {
	c := startTestCluster(t, 2)
	defer func() {
		if t.Failed() {
			t.Log(c.dump())
		}
	}()
	const marker = "sleep 7772"
	killLeftovers(t, marker)
	cli(t, c.api(), "service", "create", "web", "--replicas", "4", "--", "sleep", "7772")
	before := taskIDs(c.running("web", 4, 30*time.Second), "running")

	// A one-shot task that exits while the leader is down.
	cli(t, c.api(), "service", "create", "oneshot", "--detach", "--restart-condition", "none", "--", "sh", "-c", "sleep 1")
	waitFor(t, 20*time.Second, "oneshot running", func() (bool, string) {
		rows := psJSON(t, c.api(), "oneshot")
		return countState(rows, "running") == 1, fmt.Sprintf("%+v", rows)
	})

	lead := c.leaderIndex()
	c.servers[lead].kill()
	waitFor(t, 30*time.Second, "oneshot's exit reported after the failover", func() (bool, string) {
		rows := psJSON(t, c.api(), "oneshot")
		for _, r := range rows {
			if r.State == "complete" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", rows)
	})
	after := taskIDs(c.running("web", 4, 30*time.Second), "running")
	if !slices.Equal(before, after) {
		t.Fatalf("the failover changed the running tasks: %v → %v", before, after)
	}
	if n := len(pidsOf(marker)); n != 4 {
		t.Fatalf("after the failover: %d processes, want 4", n)
	}
	c.servers[lead].start(t)
	// The restarted replica follows, and names the new leader.
	waitFor(t, 30*time.Second, "the restarted replica names the new leader", func() (bool, string) {
		out, _ := cliErr(t, c.apis[lead], "status")
		first, _, _ := strings.Cut(out, "\n")
		return strings.Contains(first, "leading: false; leader: replica ") && !strings.Contains(first, fmt.Sprintf("leader: replica %d ", lead+1)), out
	})

	// kill -9 of an agent and an immediate restart: it re-attaches.
	c.agents[0].kill()
	c.agents[0].start(t)
	waitFor(t, 30*time.Second, "agent 1 back", func() (bool, string) {
		out, _ := cliErr(t, c.api(), "node", "ls") // a replica that just started may not answer yet
		return strings.Count(out, "Ready") == 2, out
	})
	again := taskIDs(c.running("web", 4, 30*time.Second), "running")
	if !slices.Equal(before, again) {
		t.Fatalf("an agent restart changed the running tasks: %v → %v", before, again)
	}
	if n := len(pidsOf(marker)); n != 4 {
		t.Fatalf("after the agent restart: %d processes, want 4", n)
	}

	// kill -9 of an agent for longer than its TTL: its tasks are replaced
	// on the other node; when it returns, one task per slot runs.
	rows := psJSON(t, c.api(), "web")
	var node1 uint32
	for _, r := range rows {
		if r.State == "running" && r.Desired == "running" {
			node1 = r.Node
			break
		}
	}
	victim := c.agents[0]
	if !strings.Contains(cli(t, c.api(), "node", "inspect", fmt.Sprint(node1)), `"name": "node-1"`) {
		victim = c.agents[1]
	}
	victim.kill()
	// A replacement starts once the task it replaces is confirmed stopped,
	// or a minute later (SwarmKit's old-task timeout): here, the latter.
	waitFor(t, 120*time.Second, "tasks replaced on the surviving node", func() (bool, string) {
		rows := psJSON(t, c.api(), "web")
		on := 0
		for _, r := range rows {
			if r.State == "running" && r.Desired == "running" && r.Node != node1 {
				on++
			}
		}
		return on == 4, fmt.Sprintf("%+v", rows)
	})
	victim.start(t)
	waitFor(t, 60*time.Second, "one running task per slot and no stray process", func() (bool, string) {
		rows := psJSON(t, c.api(), "web")
		slots := map[uint32]int{}
		for _, r := range rows {
			if r.State == "running" && r.Desired == "running" {
				slots[r.Slot]++
			}
		}
		n := len(pidsOf(marker))
		return len(slots) == 4 && n == 4, fmt.Sprintf("slots %v, %d processes: %+v", slots, n, rows)
	})
	cli(t, c.api(), "service", "rm", "web", "oneshot")
	waitFor(t, 30*time.Second, "every process stopped", func() (bool, string) {
		n := len(pidsOf(marker))
		return n == 0, fmt.Sprint(n, " processes left")
	})
}
