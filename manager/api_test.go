package manager

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"shoal/api/client"
	"shoal/route"
	"shoal/wire"
)

func u32(v uint32) *uint32 { return &v }

// Three replicas as Start wires them (engine, duties, control, API): each
// registers its API address, names the cluster group's leader, follows
// the log with its feed (a follower's blocking read is released by a
// write made elsewhere), explains pending tasks through the leader's
// scheduler, says how stale it may be and reads through the quorum on
// ?consistent=true, counts proposals in its metrics, and releases a
// client's blocking read after its group's leader is killed. The API's
// own behaviour (conflicts, compare-and-set, bad input, paging, request
// IDs, events) is api's tests', on groups in memory.
func TestAPIOverThreeReplicas(t *testing.T) {
	begun := time.Now()
	c := startThree(t)
	c1 := c.client(1)
	ctx := ctxT(t)

	// Each replica registered itself through its own engine; replica 1
	// may apply the last registration a moment later.
	eventually(t, 10*time.Second, func() (bool, string) {
		st, err := c1.Status(ctx)
		return err == nil && len(st.Managers) == 3 && len(st.Groups) == 3, fmt.Sprintf("status: %+v, %v", st, err)
	})
	// The monitor Start wires runs with the default timers.
	if st, err := c1.Status(ctx); err != nil || st.Monitor.FailoverGrace != client.Duration(30*time.Second) ||
		st.Monitor.OrphanTimeout != client.Duration(24*time.Hour) {
		t.Fatalf("status shows timers %+v (%v); want the defaults 30s and 24h", st.Monitor, err)
	}
	leaderNamed(t, c, begun)

	created, idx, err := c1.CreateService(ctx, client.ServiceSpec{Name: "web", Replicas: u32(3), Command: []string{"sleep", "1000"}})
	if err != nil || created.Spec.Name != "web" || *created.Spec.Replicas != 3 || idx == "" {
		t.Fatalf("create: %+v %q %v", created, idx, err)
	}

	t.Run("follower reads after a blocking read on the write's index", func(t *testing.T) {
		for id := uint64(1); id <= 3; id++ {
			l, _, err := c.client(id).Services(ctx, &client.Query{Index: tokenBefore(t, idx), Wait: 10 * time.Second})
			if err != nil || len(l.Items) != 1 || l.Items[0].Spec.Name != "web" {
				t.Fatalf("replica %d lists %+v, %v", id, l.Items, err)
			}
		}
	})

	t.Run("pending tasks say why (the leader's scheduler)", func(t *testing.T) {
		lead := c.client(c.leaderOf(route.ClusterGroup))
		eventually(t, 10*time.Second, func() (bool, string) {
			l, _, err := lead.Tasks(ctx, &client.Query{Params: url.Values{"service": {"web"}}})
			if err != nil || len(l.Items) != 3 {
				return false, fmt.Sprintf("tasks of web: %d, %v", len(l.Items), err)
			}
			for _, tk := range l.Items {
				if tk.State != "pending" || tk.Message == "" {
					return false, fmt.Sprintf("without nodes a task should be pending and say why: %+v", tk)
				}
			}
			return true, ""
		})
	})

	t.Run("staleness said, consistent reads", func(t *testing.T) {
		// Every replica says whether it knows the leader and how long
		// since it heard it; ?consistent=true reads through the quorum.
		for _, m := range c.ms {
			resp, err := http.Get("http://" + m.APIAddr + "/v1/services?consistent=true")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			lc, err := strconv.Atoi(resp.Header.Get("X-Shoal-Last-Contact"))
			if resp.StatusCode != 200 || resp.Header.Get("X-Shoal-Known-Leader") != "true" || err != nil || lc < 0 || lc > 5000 {
				t.Fatalf("replica at %s: %s, known leader %q, last contact %q", m.APIAddr, resp.Status,
					resp.Header.Get("X-Shoal-Known-Leader"), resp.Header.Get("X-Shoal-Last-Contact"))
			}
		}
		cc := *c1
		cc.Consistent = true
		if l, _, err := cc.Services(ctx, nil); err != nil || len(l.Items) == 0 {
			t.Fatalf("a consistent list through the client: %+v, %v", l, err)
		}
	})

	t.Run("metrics parse", func(t *testing.T) {
		resp, err := http.Get("http://" + c.ms[0].APIAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("metrics do not parse: %v", err)
		}
		for _, name := range []string{"shoal_tasks", "shoal_http_requests_total", "go_memstats_heap_inuse_bytes"} {
			if fams[name] == nil {
				t.Errorf("metric %s missing", name)
			}
		}
		// Every write above was proposed by some replica: the proposal
		// counters, summed over replicas, saw entries carrying at least as
		// many commands.
		var entries, cmds float64
		for _, m := range c.ms {
			resp, err := http.Get("http://" + m.APIAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			tp := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := tp.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("metrics do not parse: %v", err)
			}
			for _, f := range []struct {
				name string
				sum  *float64
			}{{"shoal_group_proposals_total", &entries}, {"shoal_group_proposed_commands_total", &cmds}} {
				fam := fams[f.name]
				if fam == nil {
					t.Fatalf("metric %s missing", f.name)
				}
				for _, mm := range fam.GetMetric() {
					*f.sum += mm.GetUntyped().GetValue() + mm.GetCounter().GetValue()
				}
			}
		}
		if entries == 0 || cmds < entries {
			t.Errorf("proposals: %v entries carrying %v commands over the replicas; want some, with at least one command each", entries, cmds)
		}
	})

	t.Run("leader killed while a client waits", func(t *testing.T) {
		g := route.ServiceGroup("web", 2)
		leader := c.leaderOf(g)
		waiter := uint64(1)
		if waiter == leader {
			waiter = 2
		}
		other := 6 - leader - waiter
		_, idx, err := c.client(waiter).Service(ctx, "web", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan uint32, 1)
		go func() {
			for {
				s, next, err := c.client(waiter).Service(ctx, "web", &client.Query{Index: idx, Wait: 25 * time.Second})
				if err != nil {
					t.Error(err)
				}
				if err != nil || *s.Spec.Replicas == 2 || next == idx {
					got <- *s.Spec.Replicas
					return
				}
				idx = next
			}
		}()
		c.stop(leader)
		eventually(t, 20*time.Second, func() (bool, string) {
			_, _, err := c.client(other).Scale(ctx, "web", 2)
			return err == nil, "scale after the leader died: " + errString(err)
		})
		select {
		case r := <-got:
			if r != 2 {
				t.Fatalf("blocking read returned replicas=%d", r)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("blocking read not released after failover")
		}
	})
}

// tokenBefore returns a cursor token one entry before tok in every group,
// so a blocking read on it returns once the replica has what tok reflects.
func tokenBefore(t *testing.T, tok string) string {
	c, err := wire.ParseCursor(tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] > 0 {
			c[i]--
		}
	}
	return c.Token()
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// A new session starts with the heartbeat period the node monitor hands a
// cluster of that many nodes (never below --min-heartbeat), not a fixed
// second: the session's first heartbeats wait that long for an answer.
func TestSessionStartsWithTheMonitorsPeriod(t *testing.T) {
	_, _, s := oneReplicaSession(t, 3*time.Second)
	if got := time.Duration(s.HeartbeatPeriod); got != 3*time.Second {
		t.Fatalf("the session's heartbeat period is %s, want the monitor's 3s", got)
	}
}
