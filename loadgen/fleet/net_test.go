package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"slices"
	"strings"
	"testing"
	"time"
)

// A worker with a token of another run, or with this run's ID and a wrong
// secret, is refused with a line saying which; a worker with the run's
// token is welcomed and its clock offset measured; a worker beyond the
// number the run waits for is refused.
func TestHubAdmitsOnlyThisRunsWorkers(t *testing.T) {
	var refusals []string
	h, err := Listen("127.0.0.1:0", func(format string, args ...any) { refusals = append(refusals, format) })
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	addr := h.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good := h.Token()

	refused := func(tok Token, want string) {
		t.Helper()
		c, err := Dial(ctx, addr, tok, "h", 1)
		var re *RefusedError
		if !errors.As(err, &re) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("token %s: got %v, want a refusal", tok, err)
		}
		if !strings.Contains(re.Why, want) {
			t.Fatalf("token %s refused with %q, want it to say %q", tok, re.Why, want)
		}
	}
	other := good
	other.Run = "0badc0de"
	refused(other, "a worker of another run")
	wrong := good
	wrong.Secret = strings.Repeat("0", 32)
	refused(wrong, "wrong token")
	unpinned := good
	unpinned.Pin = strings.Repeat("1", 32)
	refused(unpinned, "certificate does not match")
	if _, err := ParseToken("shoal-lg-nope"); err == nil {
		t.Fatal("a malformed token was parsed")
	}
	if tok, err := ParseToken(good.String()); err != nil || tok != good {
		t.Fatalf("the run's token does not parse back: %v %+v", err, tok)
	}

	// The run's token: welcomed; its clock is 3 s ahead.
	const skew = 3 * time.Second
	got := make(chan ChildConfig, 1)
	c, err := Dial(ctx, addr, good, "worker-host", 42)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		cfg, err := c.Config(func() time.Time { return time.Now().Add(skew) })
		if err != nil {
			t.Error(err)
		}
		got <- cfg
	}()
	ws, err := h.Wait(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if w.Host != "worker-host" || w.Pid != 42 {
		t.Fatalf("worker %+v", w)
	}
	if d := w.Offset - skew; d < -w.Bound || d > w.Bound || w.Bound > 100*time.Millisecond {
		t.Fatalf("offset %v ± %v, want %v", w.Offset, w.Bound, skew)
	}
	refused(good, "already has the 1 workers")
	if err := writeLine(w.ctl, controlMsg{Config: &ChildConfig{Agents: 7, First: 3}}); err != nil {
		t.Fatal(err)
	}
	if cfg := <-got; cfg.Agents != 7 || cfg.First != 3 {
		t.Fatalf("the worker got %+v", cfg)
	}
	if len(refusals) != 4 {
		t.Fatalf("the coordinator said %d refusals, want 4: %q", len(refusals), refusals)
	}
}

// A worker's observations are ordered by its stamps corrected for its
// clock offset: worker B, 3 s ahead, takes an address 1 ms after worker A
// released it, and the observer sees the release first. Then B is lost:
// the observer learns that its nodes are gone after B's last observation.
func TestMergeCorrectsWorkerClocks(t *testing.T) {
	rec := &goneRecorder{}
	r := newRemote(2, rec, nil)
	r.off[1], r.track[0], r.track[1] = int64(3*time.Second), true, true
	r.kids[0], r.kids[1] = &child{name: "A"}, &child{name: "B"}
	r.kids[0].stopping.Store(true) // A is stopped at the end; B is lost
	base := int64(1_700_000_000) * 1e9
	ms := int64(time.Millisecond)
	// B's hold, stamped by its clock, arrives first.
	r.merge(1, obsBatch{Obs: []obs{{Kind: obsHold, Node: 2, Task: 20, Nets: []string{"n"}, Addrs: []string{"a"},
		Stamp: base + 3000*ms + 11*ms, At: base + 3000*ms + 11*ms}}, Upto: base + 3000*ms + 12*ms})
	r.merge(0, obsBatch{Obs: []obs{{Kind: obsRelease, Task: 10, Stamp: base + 10*ms, At: base + 10*ms}}, Upto: base + 20*ms})
	r.merge(1, obsBatch{Upto: base + 3000*ms + 30*ms})
	r.merge(0, obsBatch{Upto: base + 30*ms})
	if len(rec.got) != 2 || rec.got[0] != "release 10" || rec.got[1] != "hold 20 on 2" {
		t.Fatalf("observed %q, want the release first", rec.got)
	}
	if rec.at[1] != base+11*ms {
		t.Fatalf("the hold's time %d is not corrected to %d", rec.at[1], base+11*ms)
	}
	r.merge(1, obsBatch{Obs: []obs{{Kind: obsHanded, Node: 3, Task: 21, Stamp: base + 3000*ms + 40*ms}}, Upto: 1<<63 - 1})
	r.merge(0, obsBatch{Upto: 1<<63 - 1})
	if n := len(rec.got); n != 4 || rec.got[2] != "handed 21 on 3" || rec.got[3] != "gone [2 3]" {
		t.Fatalf("observed %q, want the handed task then its process gone", rec.got)
	}
}

type goneRecorder struct {
	got []string
	at  []int64
}

func (g *goneRecorder) Handed(node uint32, task uint64, now time.Time) {
	g.add(now, "handed %d on %d", task, node)
}
func (g *goneRecorder) Hold(node uint32, task uint64, _, _ []string, now time.Time) {
	g.add(now, "hold %d on %d", task, node)
}
func (g *goneRecorder) Release(task uint64, now time.Time) { g.add(now, "release %d", task) }
func (g *goneRecorder) NodesGone(nodes []uint32, now time.Time) {
	slices.Sort(nodes)
	g.add(now, "gone %v", nodes)
}
func (g *goneRecorder) add(now time.Time, format string, args ...any) {
	g.got = append(g.got, fmt.Sprintf(format, args...))
	g.at = append(g.at, now.UnixNano())
}

// probingObserver probes the fleet from within Hold, as the checker does
// on an address conflict.
type probingObserver struct {
	r   *Remote
	got []string
}

func (p *probingObserver) Handed(uint32, uint64, time.Time) {}
func (p *probingObserver) Release(uint64, time.Time)        {}
func (p *probingObserver) Hold(node uint32, task uint64, _, _ []string, _ time.Time) {
	p.got = append(p.got, p.r.Probe(node, task))
}

// The checker probes the agents while the merge hands it an observation:
// Probe must not wait for the merge (a run once hung there for good after
// its first address conflict).
func TestProbeFromWithinTheMerge(t *testing.T) {
	srvConn, cliConn := net.Pipe()
	srv := rpc.NewServer()
	if err := srv.RegisterName("Fleet", &Service{f: &Fleet{}}); err != nil {
		t.Fatal(err)
	}
	go srv.ServeConn(srvConn)
	po := &probingObserver{}
	r := newRemote(1, po, nil)
	po.r = r
	r.kids[0] = &child{name: "A", rpc: rpc.NewClient(cliConn), done: make(chan struct{})}
	defer r.kids[0].rpc.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.merge(0, obsBatch{Obs: []obs{{Kind: obsHold, Node: 4, Task: 9, Stamp: 5}}, Upto: 6})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the merge and the probe wait for each other")
	}
	if len(po.got) != 1 || po.got[0] != "no agent runs as node 4" {
		t.Fatalf("probe answered %q", po.got)
	}
}
