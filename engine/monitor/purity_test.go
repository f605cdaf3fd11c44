package monitor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPure guards the package contract: the non-test files import only
// pure standard packages and shoal/statemachine, read no clock and start no
// goroutines.
func TestPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"math/rand", "os", "net", "io", "sync", "syscall", "unsafe", "runtime", "log"}
	clockFuncs := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true,
		"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
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
			if (strings.Contains(first, ".") || first == "shoal") && path != "shoal/statemachine" {
				t.Errorf("%s imports %s: only the standard library and shoal/statemachine are allowed", name, path)
			}
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %s: monitor does no I/O, reads no clock and starts no goroutines", name, path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %s", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && clockFuncs[n.Sel.Name] {
					t.Errorf("%s: time.%s at %s: time arrives as an argument", name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}
