package statemachine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCorePackagesArePure guards the rule that the core packages are pure
// (shared/STYLE.md): their non-test files import no I/O, network, clock or
// concurrency packages and none of the adapters' libraries (dragonboat,
// pebble, fasthttp), call no clock function, and start no goroutines. Each
// package lists the few outside modules it may use.
func TestCorePackagesArePure(t *testing.T) {
	forbidden := []string{"os", "net/http", "syscall", "sync", "math/rand", "runtime", "unsafe", "log",
		"github.com/lni/", "github.com/cockroachdb/pebble", "github.com/valyala/fasthttp"}
	clockFuncs := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true,
		"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
	for dir, allowed := range map[string][]string{
		".":                 {"shoal/ipam", "shoal/sched", "github.com/cespare/xxhash/v2", "github.com/klauspost/compress/zstd"},
		"../ipam":           {"github.com/RoaringBitmap/roaring/v2"},
		"../sched":          {"github.com/RoaringBitmap/roaring/v2"},
		"../engine/monitor": {"shoal/statemachine"},
		"../wire":           {"shoal/statemachine", "github.com/klauspost/compress/zstd"},
	} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				first, _, _ := strings.Cut(path, "/")
				outside := strings.Contains(first, ".") || first == "shoal"
				ok := !outside
				for _, a := range allowed {
					ok = ok || path == a
				}
				for _, bad := range forbidden {
					ok = ok && path != strings.TrimSuffix(bad, "/") && !strings.HasPrefix(path, bad)
				}
				if !ok {
					t.Errorf("%s imports %s: a core package does no I/O, reads no clock, starts no goroutines and uses no adapter library", name, path)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: go statement at %s", name, fset.Position(n.Pos()))
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && clockFuncs[n.Sel.Name] {
						t.Errorf("%s: time.%s at %s: time arrives as data", name, n.Sel.Name, fset.Position(n.Pos()))
					}
				}
				return true
			})
		}
	}
}
