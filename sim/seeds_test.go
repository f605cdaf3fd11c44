package sim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	flagSeeds   = flag.Int("sim.seeds", 12, "randomized runs: how many seeds")
	flagFirst   = flag.Uint64("sim.first", 1, "randomized runs: the first seed")
	flagSteps   = flag.Int("sim.steps", 400, "randomized runs: directives per run")
	flagSeed    = flag.Uint64("sim.seed", 0, "replay this one seed (with -sim.steps), print its shrunk script on a violation")
	flagPlant   = flag.String("sim.plant", "", "plant these seeded bugs (comma-separated; needs -tags shoal_seams)")
	flagWorkers = flag.Int("sim.workers", 0, "seeds run side by side (0: GOMAXPROCS)")
	flagShrink  = flag.Int("sim.shrink", 2000, "a failing run is shrunk within this many runs")
	flagSave    = flag.String("sim.save", "", "write a failing run's shrunk script into this directory (seed-N.txt, planted-BUG.txt)")
)

// runSeeds runs seeds first..first+n-1 of steps directives each, side by
// side, and returns the first failing seed (0: none) with its outcome and
// totals.
type seedsResult struct {
	seeds, steps int
	checks       int64
	simTime      time.Duration
	failSeed     uint64
	fail         Outcome
	elapsed      time.Duration
}

func runSeeds(t *testing.T, first uint64, n, steps int, plant string) seedsResult {
	defer debug.SetGCPercent(debug.SetGCPercent(simGC))
	start := time.Now()
	workers := *flagWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var mu sync.Mutex
	res := seedsResult{}
	next := first
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= first+uint64(n) || res.failSeed != 0 {
					mu.Unlock()
					return
				}
				seed := next
				next++
				mu.Unlock()
				out, err := RunOps(Generate(seed, steps, plant))
				mu.Lock()
				if err != nil {
					mu.Unlock()
					t.Errorf("seed %d: %v", seed, err)
					return
				}
				res.seeds++
				res.steps += out.Steps
				res.checks += out.Checks
				res.simTime += out.SimTime
				if out.Failed >= 0 && (res.failSeed == 0 || seed < res.failSeed) {
					res.failSeed, res.fail = seed, out
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

func (r seedsResult) String() string {
	s := r.elapsed.Seconds()
	return fmt.Sprintf("%d seeds, %d steps, %d checks, %s simulated in %.1fs: %.1f seeds/s, %.0f steps/s, %.0f checks/s",
		r.seeds, r.steps, r.checks, r.simTime.Round(time.Second), s, float64(r.seeds)/s, float64(r.steps)/s, float64(r.checks)/s)
}

// simGC is the garbage collector's target while seeds run: each world's
// heap is a few megabytes, and at the default (100) a quarter of the
// run's CPU went to collecting it.
const simGC = 400

// report shrinks a failing seed's run and prints its script.
func report(t *testing.T, seed uint64, steps int, plant string, o Outcome) string {
	defer debug.SetGCPercent(debug.SetGCPercent(simGC))
	ops := Generate(seed, steps, plant)
	shrunk := Shrink(ops, *flagShrink, runtime.GOMAXPROCS(0))
	expect := "" // saved, the script fails on the violation
	if plant != "" {
		expect = o.Invariant // a planted bug's script expects it
	}
	script, err := Script(shrunk, expect)
	if err != nil {
		t.Fatal(err)
	}
	if *flagSave != "" {
		name := fmt.Sprintf("seed-%d.txt", seed)
		head := fmt.Sprintf("# Seed %d (%d directives) broke %s; shrunk to %d directives.\n", seed, steps, o.Invariant, len(shrunk)-1)
		if plant != "" {
			name = "planted-" + plant + ".txt"
			head = fmt.Sprintf("# Seeded bug %s (-tags shoal_seams): found by seed %d of make sim-planted (%d directives),\n"+
				"# which broke %s; shrunk to %d directives.\n", plant, seed, steps, o.Invariant, len(shrunk)-1)
		}
		if err := os.WriteFile(filepath.Join(*flagSave, name), []byte(head+script), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("seed %d broke %s after directive %d of %d (replay: go test ./sim/ -run TestSeeds -sim.seed=%d -sim.steps=%d%s)\n%s\n"+
		"shrunk to %d directives; saved under sim/testdata/scripts/ this script breaks it the same way:\n\n%s",
		seed, o.Invariant, o.Failed, len(ops)-1, seed, steps, plantFlag(plant), o.Report, len(shrunk)-1, script)
}

func plantFlag(p string) string {
	if p == "" {
		return ""
	}
	return " -tags shoal_seams -sim.plant=" + p
}

// TestSeeds runs the randomized simulation over a fixed set of seeds
// (make test: -sim.seeds 12 -sim.steps 400; make sim: many more) and
// fails with the first failing seed's shrunk script.
func TestSeeds(t *testing.T) {
	if *flagPlant != "" && !SeamsCompiled {
		t.Skip("-sim.plant needs -tags shoal_seams")
	}
	first, n := *flagFirst, *flagSeeds
	if *flagSeed != 0 {
		first, n = *flagSeed, 1
	}
	res := runSeeds(t, first, n, *flagSteps, *flagPlant)
	t.Logf("sim: %s", res)
	fmt.Printf("sim: %s\n", res)
	if res.failSeed != 0 {
		t.Fatal(report(t, res.failSeed, *flagSteps, *flagPlant, res.fail))
	}
}

// TestGenerateReplays: a seed's directives and run are the same every
// time.
func TestGenerateReplays(t *testing.T) {
	a, b := Generate(7, 200, ""), Generate(7, 200, "")
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("one seed generated two runs")
	}
	oa, err := RunOps(a)
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := RunOps(b)
	if oa != ob {
		t.Fatalf("one seed ran two ways:\n%+v\n%+v", oa, ob)
	}
	if !strings.HasPrefix(a[0].String(), "sim seed=7") {
		t.Fatalf("the run does not start with its seed: %s", a[0])
	}
}

// plantedBugs are the seeded bugs the randomized runs must find within
// make sim-planted's 40 seeds (make test runs free-at-release's 12 and
// the saved scripts): the state machine's free-at-release (an address
// freed when its task ends; address-agents) and decide-early (a reconnect
// decided at the first heartbeat, before the re-report; held-aside), and
// the agent protocol's sync-lagging (manager/control: a sync answered
// from a replica that has not applied the agent's sequence; as-desired).
// The agent protocol's complete-early (a COMPLETE without its read
// barrier) is not among them: runs reach stale COMPLETEs, but none does
// harm an invariant can see (docs/sim.md); -sim.plant=complete-early
// runs it.
var plantedBugs = []string{"free-at-release", "decide-early", "sync-lagging"}

// TestPlanted runs the default seeds with each seeded bug planted (needs
// -tags shoal_seams): each must break an invariant, and the failing seed's
// shrunk script is printed (-v). -sim.plant narrows it to one bug.
func TestPlanted(t *testing.T) {
	if !SeamsCompiled {
		t.Skip("the seeded bugs are compiled only with -tags shoal_seams (make sim-planted)")
	}
	bugs := plantedBugs
	if *flagPlant != "" {
		bugs = strings.Split(*flagPlant, ",")
	}
	for _, bug := range bugs {
		t.Run(bug, func(t *testing.T) {
			res := runSeeds(t, *flagFirst, *flagSeeds, *flagSteps, bug)
			t.Logf("sim: %s", res)
			if res.failSeed == 0 {
				t.Fatalf("%d seeds of %d directives ran with %s planted and no invariant broke", res.seeds, *flagSteps, bug)
			}
			rep := report(t, res.failSeed, *flagSteps, bug, res.fail)
			if !strings.Contains(rep, "expect-violation "+res.fail.Invariant) || !strings.Contains(rep, "VIOLATIONS (") {
				t.Fatalf("the shrunk script does not break %s again:\n%s", res.fail.Invariant, rep)
			}
			t.Logf("found, as expected: %s", rep)
		})
	}
}
