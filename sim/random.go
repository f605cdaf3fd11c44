package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Generate returns the directives of seed's randomized run: a world of
// two to five agents and one or two services, then steps directives drawn
// from a workload (creates, scales, updates, removals, new agents) and
// faults (partitions, lossy, slow and duplicating deliveries, agent
// restarts with and without their store, manager crashes and replica
// restarts, leader changes, lagging replicas) between runs of the clock,
// and a final stabilize. The seed alone decides them all, and the world
// they build (its "sim" directive carries the seed), so a seed replays
// its run exactly. With plant set the run plants those seeded bugs; with
// one of the state machine's among them it leaves out what restores a
// replica from a snapshot (a restored state keeps no seeded bug; the
// agent protocol's are planted again in a restarted replica).
func Generate(seed uint64, steps int, plant string) []Op {
	r := rand.New(rand.NewPCG(seed, 0x6e4e))
	g := &gen{r: r, images: map[string]int{}}
	head := fmt.Sprintf("sim seed=%d replicas=%d groups=%d lag=%dms", seed, 3, 1+r.IntN(2), 100*r.IntN(8))
	if plant != "" {
		head += " plant=" + plant
	}
	ops := []Op{mustParse(head)}
	for range 2 + r.IntN(4) {
		ops = append(ops, g.newAgent())
	}
	for range 1 + r.IntN(2) {
		ops = append(ops, g.create())
	}
	for range steps {
		ops = append(ops, g.step(statePlanted(plant)))
	}
	return append(ops, mustParse("stabilize"))
}

type gen struct {
	r        *rand.Rand
	agents   int
	services []string
	images   map[string]int // image updates per service
	made     int
}

func mustParse(s string) Op {
	op, err := ParseOp(s)
	if err != nil {
		panic(err)
	}
	return op
}

func (g *gen) newAgent() Op {
	g.agents++
	return mustParse(fmt.Sprintf("agent-up n%d", g.agents))
}

func (g *gen) create() Op {
	g.made++
	name := fmt.Sprintf("s%d", g.made)
	g.services = append(g.services, name)
	if g.r.IntN(2) == 0 {
		// The reconcile policy cycles with the services made (no draw, so
		// the seeds' other directives stay as they were).
		reconcile := [...]string{"", " reconcile=keep_original", " reconcile=longest_running", " reconcile=keep_replacement"}[g.made%4]
		return mustParse(fmt.Sprintf("create-service %s replicas=%d lost-after=%ds%s", name, 1+g.r.IntN(4), 20+g.r.IntN(100), reconcile))
	}
	return mustParse(fmt.Sprintf("create-service %s replicas=%d", name, 1+g.r.IntN(4)))
}

func (g *gen) agent() string { return fmt.Sprintf("n%d", 1+g.r.IntN(g.agents)) }

func (g *gen) replica() string { return fmt.Sprintf("m%d", 1+g.r.IntN(3)) }

// step draws one directive.
func (g *gen) step(planted bool) Op {
	type choice struct {
		weight int
		op     func() string
	}
	svc := func() string { return g.services[g.r.IntN(len(g.services))] }
	choices := []choice{
		{60, func() string {
			if g.r.IntN(10) == 0 {
				return fmt.Sprintf("advance %ds", 5+g.r.IntN(40))
			}
			return fmt.Sprintf("advance %dms", 50+g.r.IntN(3000))
		}},
		{3, func() string {
			if len(g.services) >= 4 {
				return ""
			}
			return g.create().String()
		}},
		{4, func() string {
			if len(g.services) == 0 {
				return ""
			}
			return fmt.Sprintf("update-service %s replicas=%d", svc(), g.r.IntN(6))
		}},
		{3, func() string {
			if len(g.services) == 0 {
				return ""
			}
			name := svc()
			g.images[name]++ // a new image each time (no draw)
			return fmt.Sprintf("update-service %s image=v%d", name, g.images[name]+1)
		}},
		{1, func() string {
			if len(g.services) == 0 {
				return ""
			}
			i := g.r.IntN(len(g.services))
			name := g.services[i]
			g.services = append(g.services[:i], g.services[i+1:]...)
			return "remove-service " + name
		}},
		{3, func() string { return "partition " + g.agent() }},
		{3, func() string {
			if g.r.IntN(3) == 0 {
				return "heal"
			}
			return "heal " + g.agent()
		}},
		{3, func() string {
			if g.r.IntN(3) == 0 {
				return "deliver"
			}
			return fmt.Sprintf("deliver drop=%.2f delay=%dms dup=%.2f", g.r.Float64()*0.2, g.r.IntN(800), g.r.Float64()*0.1)
		}},
		{2, func() string {
			if g.r.IntN(4) == 0 {
				return "restart-agent " + g.agent() + " wipe"
			}
			return "restart-agent " + g.agent()
		}},
		{1, func() string {
			if planted {
				return ""
			}
			return "crash-manager"
		}},
		{1, func() string {
			if planted {
				return ""
			}
			return "restart-manager " + g.replica()
		}},
		{2, func() string { return "leader-change " + g.replica() }},
		{2, func() string {
			if g.r.IntN(4) == 0 { // a replica far behind (restarted, or slow)
				return fmt.Sprintf("lag %s %ds", g.replica(), 5+g.r.IntN(40))
			}
			return fmt.Sprintf("lag %s %dms", g.replica(), 100*g.r.IntN(20))
		}},
		{1, func() string {
			if g.agents >= 6 {
				return ""
			}
			return g.newAgent().String()
		}},
	}
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	for {
		n := g.r.IntN(total)
		for _, c := range choices {
			if n -= c.weight; n < 0 {
				if s := c.op(); s != "" {
					return mustParse(s)
				}
				break
			}
		}
	}
}

// Outcome is how a run of directives went.
type Outcome struct {
	Steps  int   // directives run
	Failed int   // index of the directive after which the first violation was seen; -1: none
	Checks int64 // checks the checker made
	// Invariant is the first violation's invariant, Report the checker's
	// violations.
	Invariant string
	Report    string
	SimTime   time.Duration
}

// RunOps runs ops (the first a "sim" directive), stopping at the first
// directive after which the checker saw a violation. A directive that
// fails (a service a shrunk run never created) changes nothing and is
// not an error.
func RunOps(ops []Op) (Outcome, error) {
	out := Outcome{Failed: -1}
	if len(ops) == 0 {
		return out, fmt.Errorf("no directive")
	}
	cfg, err := ConfigOf(ops[0])
	if err != nil {
		return out, err
	}
	w, err := New(cfg)
	if err != nil {
		return out, err
	}
	for i, op := range ops[1:] {
		_, _ = w.Do(op)
		out.Steps = i + 1
		if w.Violations() > 0 {
			out.Failed = i + 1
			break
		}
	}
	out.Checks = w.Checks()
	out.SimTime = w.clk.Now().Sub(epoch)
	if out.Failed >= 0 {
		vs := w.chk.Violations()
		if len(vs) > 0 {
			out.Invariant = vs[0].Invariant
		}
		var b strings.Builder
		w.violations(&b)
		out.Report = b.String()
	}
	return out, nil
}

// Shrink returns a shorter run of ops that still fails with the same
// invariant, trying at most budget runs:
//
//  1. everything after the failing directive goes;
//  2. a prefix ending in "stabilize": the shortest of 2, 4, 8, …
//     directives that fails so, then halving the gap below it (a run
//     that breaks a quiescence check often breaks it long before its
//     end; a run that breaks a check on the way is cut at once);
//  3. chunks of halving size are removed (never the "sim" directive)
//     while the run still fails so;
//  4. consecutive runs of the clock become one;
//  5. a directive between two runs of the clock moves before or after
//     both, which become one;
//  6. a directive loses an option (lost-after=, drop=, …);
//
// steps 3 to 6 again while they change anything. It returns the shortest
// failing run found. Candidates are run side by side (workers, at least
// one), the first that fails taken: the result is the same for any
// number of workers.
func Shrink(ops []Op, budget, workers int) []Op {
	first, err := RunOps(ops)
	if err != nil || first.Failed < 0 {
		return ops
	}
	s := shrinker{want: first.Invariant, budget: budget, workers: max(workers, 1)}
	cur := append([]Op(nil), ops[:first.Failed+1]...)
	stabilized := func(k int) []Op {
		c := append([]Op(nil), cur[:k]...)
		if c[len(c)-1].Cmd != "stabilize" {
			c = append(c, Op{Cmd: "stabilize"})
		}
		return c
	}
	var ks []int
	for k := 2; k < len(cur)-1; k *= 2 {
		ks = append(ks, k)
	}
	var cands [][]Op
	for _, k := range ks {
		cands = append(cands, stabilized(k))
	}
	if i, c := s.first(cands); i >= 0 {
		cur = c
		lo, hi := 1, ks[i]
		if i > 0 {
			lo = ks[i-1]
		}
		for hi-lo > 1 && s.budget > 0 {
			mid := (lo + hi) / 2
			if _, c := s.first([][]Op{stabilized(mid)}); c != nil {
				cur, hi = c, mid
				continue
			}
			lo = mid
		}
	}
	for changed := true; changed && s.budget > 0; {
		changed = false
		for n := (len(cur) - 1) / 2; n >= 1 && s.budget > 0; {
			removed := false
			for i := 1; i+n <= len(cur) && s.budget > 0; {
				var cands [][]Op
				for at := i; at+n <= len(cur) && len(cands) < s.workers; at += n {
					cands = append(cands, append(append([]Op(nil), cur[:at]...), cur[at+n:]...))
				}
				k, c := s.first(cands)
				if k < 0 {
					i += n * len(cands)
					continue
				}
				cur, removed, changed = c, true, true
				i += n * k
			}
			if !removed {
				n /= 2
			}
		}
		// Consecutive runs of the clock become one, where the run still
		// fails so.
		for i := 1; i+1 < len(cur) && s.budget > 0; i++ {
			a, b := cur[i], cur[i+1]
			if a.Cmd != "advance" || b.Cmd != "advance" || len(a.Pos) != 1 || len(b.Pos) != 1 {
				continue
			}
			da, err1 := time.ParseDuration(a.Pos[0])
			db, err2 := time.ParseDuration(b.Pos[0])
			if err1 != nil || err2 != nil {
				continue
			}
			merged := Op{Cmd: "advance", Pos: []string{(da + db).String()}}
			cand := append(append(append([]Op(nil), cur[:i]...), merged), cur[i+2:]...)
			if _, c := s.first([][]Op{cand}); c != nil {
				cur, changed = c, true
				i--
			}
		}
		// A directive between two runs of the clock moves before or
		// after both, which become one.
		for i := 2; i+1 < len(cur) && s.budget > 0; i++ {
			a, x, b := cur[i-1], cur[i], cur[i+1]
			if a.Cmd != "advance" || b.Cmd != "advance" || x.Cmd == "advance" || len(a.Pos) != 1 || len(b.Pos) != 1 {
				continue
			}
			da, err1 := time.ParseDuration(a.Pos[0])
			db, err2 := time.ParseDuration(b.Pos[0])
			if err1 != nil || err2 != nil {
				continue
			}
			merged := Op{Cmd: "advance", Pos: []string{(da + db).String()}}
			head, tail := cur[:i-1], cur[i+2:]
			later := append(append(append([]Op(nil), head...), merged, x), tail...)
			sooner := append(append(append([]Op(nil), head...), x, merged), tail...)
			if _, c := s.first([][]Op{later, sooner}); c != nil {
				cur, changed = c, true
			}
		}
		// A directive loses an option (a service without its window, a
		// network without its drops): plainer, and often removable then.
		for i := 1; i < len(cur) && s.budget > 0; i++ {
			var cands [][]Op
			for k := range cur[i].KV {
				if cur[i].Cmd == "create-service" && cur[i].KV[k][0] == "replicas" {
					continue
				}
				op := cur[i]
				op.KV = append(append([][2]string(nil), op.KV[:k]...), op.KV[k+1:]...)
				cands = append(cands, append(append(append([]Op(nil), cur[:i]...), op), cur[i+1:]...))
			}
			if k, c := s.first(cands); k >= 0 {
				cur, changed = c, true
				i--
			}
		}
	}
	return cur
}

// shrinker runs Shrink's candidates.
type shrinker struct {
	want    string // the invariant the run must still break
	budget  int    // runs left
	workers int
}

// first runs cands (at most the budget left), side by side, and returns
// the index of the first that fails with the invariant wanted, cut after
// its failing directive (-1, nil: none). The budget pays for the runs up
// to that one, as if they ran one after another.
func (s *shrinker) first(cands [][]Op) (int, []Op) {
	if len(cands) > s.budget {
		cands = cands[:max(s.budget, 0)]
	}
	cut := make([][]Op, len(cands))
	var wg sync.WaitGroup
	next := make(chan int, len(cands))
	for i := range cands {
		next <- i
	}
	close(next)
	for range min(s.workers, len(cands)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o, err := RunOps(cands[i])
				if err == nil && o.Failed >= 0 && o.Invariant == s.want {
					cut[i] = cands[i][:o.Failed+1]
				}
			}
		}()
	}
	wg.Wait()
	for i, c := range cut {
		if c != nil {
			s.budget -= i + 1
			return i, c
		}
	}
	s.budget -= len(cands)
	return -1, nil
}

// Script prints ops as a datadriven script with each directive's output
// (as TestScripts prints it), so that, saved under testdata/scripts, it
// runs again as it ran here; expect names the invariant the run broke (""
// none), which the script then declares it expects.
func Script(ops []Op, expect string) (string, error) {
	var b strings.Builder
	if len(ops) == 0 {
		return "", fmt.Errorf("no directive")
	}
	cfg, err := ConfigOf(ops[0])
	if err != nil {
		return "", err
	}
	w, err := New(cfg)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "%s\n----\n\n", ops[0])
	if expect != "" {
		fmt.Fprintf(&b, "expect-violation %s\n----\n\n", expect)
	}
	seen := 0
	for _, op := range ops[1:] {
		out, err := w.Do(op)
		if err != nil {
			out += "error: " + err.Error() + "\n"
		}
		if n := w.Violations(); n > seen {
			var v strings.Builder
			w.violations(&v)
			out += fmt.Sprintf("VIOLATIONS (%d):\n%s", n, v.String())
			seen = n
		}
		fmt.Fprintf(&b, "%s\n----\n%s\n", op, out)
	}
	return b.String(), nil
}
