package shoal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// edges is the house plan (shared/DESIGN.md, "arrows only point down"):
// for every package of the module, the shoal packages its non-test files
// may import and the outside modules it may use. A package that is not in
// this table fails TestDependencies: a new folder declares its edges here.
// The table lists only what exists: a row for a missing folder, or an
// edge its package does not use, fails too (a pattern must match at least
// one import).
//
// Patterns: "internal/*" is any package under shoal/internal; "*" is
// anything. Standard library imports are always allowed, except that pure
// packages are held to the purity rule below.
var edges = map[string]rule{
	// Pure cores: data in, data out.
	"statemachine": {pure: true,
		shoal: []string{"ipam", "sched", "internal/*"},
		third: []string{"github.com/cespare/xxhash/v2", "github.com/klauspost/compress/zstd"}},
	"ipam": {pure: true,
		shoal: []string{"internal/*"},
		third: []string{"github.com/RoaringBitmap/roaring/v2"}},
	"sched": {pure: true,
		shoal: []string{"internal/*"},
		third: []string{"github.com/RoaringBitmap/roaring/v2"}},
	"wire": {pure: true,
		shoal: []string{"statemachine", "internal/*"},
		third: []string{"github.com/klauspost/compress"}},
	"engine/monitor": {pure: true,
		shoal: []string{"statemachine", "cluster", "internal/*"}},
	// The vocabulary callers share with the cluster's parts: sentinel
	// errors, contact and membership values. Pure, the standard library
	// only, so the API matches the engine's errors without importing it.
	"cluster": {pure: true},

	// The cluster's identities: CA, certificates, join tokens. Pure: time
	// and randomness come in as arguments.
	"security": {pure: true},
	// A TLS directory on disk (PEM files, join secrets).
	"security/tlsdir": {shoal: []string{"security"}},

	// Leaf vocabulary packages: the standard library only.
	"internal/clock": {},
	// A call's context whose deadline timer starts only when waited on.
	"internal/callctx": {},
	"internal/mix":     {pure: true},
	"internal/varint":  {pure: true},
	// Whether this build asserts internal invariants (-tags shoal_invariants).
	"internal/invariants": {pure: true},
	// The one reader of /proc/PID/stat (the agent's executor, the loadgen).
	"internal/procstat": {},
	// The one reader of the machine's memory size (/proc/meminfo).
	"internal/meminfo": {},
	// Free loopback addresses for tests and the loadgen's replicas.
	"internal/freeport": {},
	// Network namespaces on a bridge, cut with tc, for partition tests.
	"internal/netns": {third: []string{"golang.org/x/sys/unix"}},
	// The API's JSON codec for responses and event lines.
	"internal/jsoncodec": {third: []string{"github.com/goccy/go-json"}},
	// How a task ID is printed for people and matched back from a prefix.
	"internal/taskref": {pure: true, shoal: []string{"internal/mix"}},

	// Which group owns a command: pure, shared by the engine and the
	// duties' in-memory harness.
	"route": {pure: true,
		shoal: []string{"statemachine"},
		third: []string{"github.com/cespare/xxhash/v2"}},
	// Leader duties: loops over a narrow interface, no Raft library.
	"engine/duty": {
		shoal: []string{"statemachine", "sched", "engine/monitor", "route", "cluster", "internal/*"}},
	// Test-only package (scenario scripts); its non-test files import nothing.
	"engine/scenario": {},

	// Adapters.
	// Raft messages between replicas (dragonboat's transport plug-in).
	"engine/raftnet": {third: []string{"github.com/lni/dragonboat/v4"}},
	"engine": {
		shoal: []string{"statemachine", "route", "cluster", "engine/raftnet", "internal/*"},
		third: []string{"github.com/lni/dragonboat/v4"}},
	// The manager's protocols with its agents: value functions plus short
	// loops over the groups' narrow interface, no Raft engine, no HTTP.
	"manager/control": {shoal: []string{"cluster", "route", "statemachine", "wire", "internal/*"}},
	"api": {
		shoal: []string{"cluster", "route", "statemachine", "wire", "api/client", "manager/control", "security", "internal/*"},
		third: []string{"github.com/valyala/fasthttp", "github.com/VictoriaMetrics/metrics"}},
	"api/client": {
		shoal: []string{"wire", "security", "internal/*"},
		third: []string{"github.com/valyala/fasthttp"}},
	// The agent knows wire/, the state machine's enums and IDs, a clock,
	// /proc and its store, never a manager's insides (see walls).
	"agent": {
		shoal: []string{"wire", "statemachine", "internal/clock", "internal/procstat", "internal/meminfo", "internal/varint", "internal/callctx"},
		third: []string{"github.com/cockroachdb/pebble"}},
	"loadgen": {
		shoal: []string{"agent", "api/client", "internal/*", "loadgen/*"},
		third: []string{"github.com/HdrHistogram/hdrhistogram-go", "github.com/schollz/progressbar/v3"}},
	// The load generator's parts see the cluster only as a user and an
	// agent do: through api/client and the real agent.
	"loadgen/check":    {shoal: []string{"api/client", "loadgen/report"}},
	"loadgen/cluster":  {shoal: []string{"api/client", "security/tlsdir", "internal/freeport"}},
	"loadgen/fleet":    {shoal: []string{"agent", "api/client", "wire", "statemachine", "security", "internal/*"}, third: []string{"github.com/valyala/fasthttp"}},
	"loadgen/report":   {third: []string{"github.com/go-echarts/go-echarts/v2"}},
	"loadgen/watch":    {shoal: []string{"api/client", "internal/jsoncodec"}},
	"loadgen/workload": {shoal: []string{"api/client"}, third: []string{"golang.org/x/sync"}},
	// One manager replica: engine + duties + API wired together (tests
	// start several in one process), and its whole life as `shoal serve`
	// runs it (TLS directory, join, quorum wait, hand-over at stop).
	"manager": {
		shoal: []string{"engine", "engine/duty", "engine/monitor", "api", "api/client", "manager/control", "statemachine", "security", "security/tlsdir", "internal/*"}},
	// The binary: flags and output over the manager, the agent and the
	// loadgen.
	"cmd/shoal": {
		shoal: []string{"manager", "api", "api/client", "agent", "engine", "engine/monitor", "loadgen", "loadgen/fleet",
			"loadgen/report", "security", "security/tlsdir", "statemachine", "stackfile", "wire", "internal/clock", "internal/meminfo", "internal/taskref"},
		third: []string{"github.com/spf13/cobra", "github.com/spf13/pflag", "github.com/docker/go-units"}},
	// A stack file (a compose file's subset) read into API documents.
	"stackfile": {pure: true,
		shoal: []string{"api/client", "sched"},
		third: []string{"go.yaml.in/yaml/v3", "github.com/docker/go-units"}},
	// The deterministic simulation of the whole system: the groups in
	// memory (duty.Memory and replicas), the duties, control, real agent
	// machines, the loadgen's checker fed what the API renders.
	"sim": {shoal: []string{"agent", "api", "api/client", "cluster", "engine/duty", "engine/monitor", "internal/clock",
		"loadgen/check", "manager/control", "route", "sim/dialect", "statemachine", "wire"}},
	// The datadriven dialect sim, engine/scenario and engine/monitor's
	// scripts share.
	"sim/dialect": {shoal: []string{"statemachine"}, third: []string{"github.com/cockroachdb/datadriven"}},
	// The step-by-step scenario runner engine/scenario's scripts run on.
	"sim/steps":    {shoal: []string{"engine/duty", "engine/monitor", "internal/clock", "route", "sim/dialect", "statemachine"}},
	"perf/summary": {third: []string{"golang.org/x/perf"}},
	"perf/compare": {shoal: []string{"loadgen/report"}},
}

// walls: packages that must never depend, directly or through other shoal
// packages, on the shoal packages in never, nor use (through any shoal
// package they reach) the outside modules in neverThird. Patterns as in
// edges. Outside modules' own dependencies are not followed.
var walls = []wall{
	// The engine is the Raft adapter: nothing below it or beside it
	// reaches it.
	{from: []string{"api/client", "wire", "engine/duty", "route", "cluster"}, never: []string{"engine"}},
	// The API translates: JSON or wire in, a call through a narrow
	// interface, JSON or wire out. It reaches no engine part and no Raft
	// library (manager.Start hands it the engine and the duties).
	{from: []string{"api"}, never: []string{"engine", "engine/*"},
		neverThird: []string{"github.com/lni/"}},
	// The manager's protocols run over the groups' seam alone: no engine
	// part (tests drive them on duty.Memory), no Raft library, no HTTP.
	{from: []string{"manager/control"}, never: []string{"engine", "engine/*"},
		neverThird: []string{"github.com/lni/", "github.com/valyala/fasthttp"}},
	// An agent sees managers only through wire: no engine part, no Raft
	// library, no HTTP server.
	{from: []string{"agent"}, never: []string{"engine", "engine/*"},
		neverThird: []string{"github.com/lni/", "github.com/valyala/fasthttp"}},
	// The loadgen sees the cluster only through the API, the event stream
	// and its agents: never the engine or a manager.
	{from: []string{"loadgen", "loadgen/*"}, never: []string{"engine", "engine/*", "manager"},
		neverThird: []string{"github.com/lni/"}},
}

type wall struct {
	from, never, neverThird []string
}

// adapterLibs are the libraries only adapters use.
var adapterLibs = []string{"github.com/lni/", "github.com/cockroachdb/pebble", "github.com/valyala/fasthttp"}

type rule struct {
	// pure: no I/O, clock, concurrency or adapter library (STYLE.md habits 1
	// and 2): forbidden standard packages, no time.Now and friends, no go
	// statements.
	pure  bool
	shoal []string // allowed shoal/... imports, without the "shoal/" prefix
	third []string // allowed outside module path prefixes
}

var (
	pureForbidden = []string{"os", "net/http", "syscall", "sync", "math/rand", "runtime", "unsafe", "log"}
	clockFuncs    = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true,
		"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
)

func (r rule) allowsShoal(pkg string) bool {
	for _, p := range r.shoal {
		if p == "*" || p == pkg || strings.HasSuffix(p, "/*") && strings.HasPrefix(pkg, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

func (r rule) allowsThird(path string) bool {
	for _, p := range r.third {
		if p == "*" || path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// pkgInfo is one package's non-test imports.
type pkgInfo struct {
	shoal []string // shoal/... imports without the prefix
	files map[string]*ast.File
	fset  *token.FileSet
}

// loadPackages parses the non-test Go files of every directory of the
// module (testdata, hidden and underscore folders skipped).
func loadPackages(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	pkgs := map[string]*pkgInfo{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		p := pkgs[dir]
		if p == nil {
			p = &pkgInfo{files: map[string]*ast.File{}, fset: token.NewFileSet()}
			pkgs[dir] = p
		}
		f, err := parser.ParseFile(p.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		p.files[path] = f
		for _, imp := range imports(f) {
			if dep, ok := strings.CutPrefix(imp, "shoal/"); ok && !slices.Contains(p.shoal, dep) {
				p.shoal = append(p.shoal, dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func imports(f *ast.File) []string {
	var out []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		out = append(out, path)
	}
	return out
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != "shoal"
}

// TestDependencies checks every package's imports against edges, that
// edges lists only what is used, the purity of the core packages, and the
// walls.
func TestDependencies(t *testing.T) {
	pkgs := loadPackages(t)
	if len(pkgs) == 0 {
		t.Fatal("no packages found: run the test from the repository root")
	}
	for dir, p := range pkgs {
		r, ok := edges[dir]
		if !ok {
			t.Errorf("package shoal/%s is not in the dependency table: declare its edges in deps_test.go (which shoal packages and outside modules it may import)", dir)
			continue
		}
		for name, f := range p.files {
			for _, path := range imports(f) {
				switch {
				case path == "shoal" || strings.HasPrefix(path, "shoal/"):
					dep := strings.TrimPrefix(path, "shoal/")
					if !r.allowsShoal(dep) {
						t.Errorf("%s imports %s: shoal/%s may import only %v (edit deps_test.go if the house plan changed)", name, path, dir, r.shoal)
					}
				case isStd(path):
					if r.pure && slices.ContainsFunc(pureForbidden, func(b string) bool { return path == b || strings.HasPrefix(path, b+"/") }) {
						t.Errorf("%s imports %s: a core package does no I/O, reads no clock and starts no goroutines", name, path)
					}
				default:
					if r.pure && slices.ContainsFunc(adapterLibs, func(b string) bool { return strings.HasPrefix(path, b) }) {
						t.Errorf("%s imports %s: core packages use no dragonboat, pebble or fasthttp", name, path)
					}
					if !r.allowsThird(path) {
						t.Errorf("%s imports %s: shoal/%s may use only %v from outside the module", name, path, dir, r.third)
					}
				}
			}
			if r.pure {
				checkPure(t, name, p.fset, f)
			}
		}
		slices.Sort(p.shoal)
	}
	for dir, r := range edges {
		p, ok := pkgs[dir]
		if !ok {
			t.Errorf("the dependency table has a row for shoal/%s, which does not exist: remove it", dir)
			continue
		}
		var third []string
		for _, f := range p.files {
			for _, path := range imports(f) {
				if path != "shoal" && !strings.HasPrefix(path, "shoal/") && !isStd(path) {
					third = append(third, path)
				}
			}
		}
		for _, e := range r.shoal {
			if !slices.ContainsFunc(p.shoal, func(dep string) bool { return rule{shoal: []string{e}}.allowsShoal(dep) }) {
				t.Errorf("the dependency table lets shoal/%s import %s, which it does not: remove the edge", dir, e)
			}
		}
		for _, e := range r.third {
			if !slices.ContainsFunc(third, func(path string) bool { return rule{third: []string{e}}.allowsThird(path) }) {
				t.Errorf("the dependency table lets shoal/%s use %s, which it does not: remove the edge", dir, e)
			}
		}
	}
	for _, w := range walls {
		forbidden := rule{shoal: w.never}
		forbiddenThird := rule{third: w.neverThird}
		matched := false
		for dir := range pkgs {
			if !(rule{shoal: w.from}).allowsShoal(dir) {
				continue
			}
			matched = true
			for _, path := range reachable(pkgs, dir) {
				to := path[len(path)-1]
				if forbidden.allowsShoal(to) {
					t.Errorf("shoal/%s depends on shoal/%s through %s: it must never, directly or transitively", dir, to, strings.Join(path, " → "))
				}
				if p := pkgs[to]; p != nil && len(w.neverThird) > 0 {
					used := map[string]bool{}
					for _, f := range p.files {
						for _, imp := range imports(f) {
							if !isStd(imp) && !strings.HasPrefix(imp, "shoal/") && forbiddenThird.allowsThird(imp) && !used[imp] {
								used[imp] = true
								t.Errorf("shoal/%s uses %s through %s: it must never, directly or transitively", dir, imp, strings.Join(path, " → "))
							}
						}
					}
				}
			}
		}
		if !matched {
			t.Errorf("a wall names packages %v, none of which exists: remove it", w.from)
		}
	}
	if testing.Verbose() {
		dirs := slices.Sorted(func(yield func(string) bool) {
			for d := range pkgs {
				if !yield(d) {
					return
				}
			}
		})
		for _, d := range dirs {
			t.Logf("shoal/%s → %v", d, pkgs[d].shoal)
		}
	}
}

// checkPure reports go statements and clock reads in a core package file.
func checkPure(t *testing.T, name string, fset *token.FileSet, f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			t.Errorf("%s: go statement at %s: a core package starts no goroutines", name, fset.Position(n.Pos()))
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && clockFuncs[n.Sel.Name] {
				t.Errorf("%s: time.%s at %s: time arrives as data", name, n.Sel.Name, fset.Position(n.Pos()))
			}
		}
		return true
	})
}

// reachable returns, for from and every shoal package it depends on, the
// shortest import path from → … → that package.
func reachable(pkgs map[string]*pkgInfo, from string) [][]string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	var out [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		var path []string
		for c := cur; c != ""; c = prev[c] {
			path = append([]string{c}, path...)
		}
		out = append(out, path)
		if p := pkgs[cur]; p != nil {
			for _, dep := range p.shoal {
				if _, ok := prev[dep]; !ok {
					prev[dep] = cur
					queue = append(queue, dep)
				}
			}
		}
	}
	return out
}
