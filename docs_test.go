package shoal_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/ and examples/ hold documentation and files to deploy, no Go code.
func TestDocsAndExamplesHoldNoGoCode(t *testing.T) {
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasSuffix(path, ".go") {
				t.Errorf("%s: Go code belongs in a package folder, not in %s/", path, dir)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// pendingPages are pages the README links that other work in flight
// writes (stack files, service flags, logs, the loadgen fleet); each must
// exist once that work has landed, and then leaves this list.
var pendingPages = map[string]bool{}

var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// Every relative link of the README and the docs pages names a file that
// exists.
func TestDocLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob("docs/*.md")
	pages = append(pages, "README.md", "api/README.md", "perf/NOTEBOOK.md")
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			path := filepath.Clean(filepath.Join(filepath.Dir(page), target))
			if _, err := os.Stat(path); err != nil && !pendingPages[path] {
				t.Errorf("%s links %s, which does not exist", page, target)
			}
		}
	}
}
