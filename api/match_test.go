package api

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// matchSplit is how routes were matched before: the path trimmed of
// slashes and split, segment by segment.
func matchSplit(pattern []string, path string) ([]string, bool) {
	return matchSegs(pattern, strings.Split(strings.Trim(path, "/"), "/"))
}

func matchSegs(pattern, segs []string) ([]string, bool) {
	if len(pattern) != len(segs) {
		return nil, false
	}
	var args []string
	for i, p := range pattern {
		switch {
		case p == "*":
			if segs[i] == "" {
				return nil, false
			}
			args = append(args, segs[i])
		case p != segs[i]:
			return nil, false
		}
	}
	return args, true
}

// Every route matches a path, and takes the same arguments from it, as
// when the path was split into strings: over the routes' own paths, and
// random paths of their segments, "*" values, empty segments and slashes.
func TestMatchAsSplit(t *testing.T) {
	s := &Server{}
	routes := s.routes()
	words := []string{"", "v1", "agent", "heartbeat", "services", "web", "scale", "tasks", "logs", "x", "metrics", "nodes", "42", "tokens", "rotate"}
	rng := rand.New(rand.NewPCG(1, 2))
	paths := []string{"/", "", "//", "/v1//services", "/v1/services/", "//v1/services//", "/v1/services/a/b/c",
		"/v1/a/b/c/d/e/f/g/h/i/j", "/1/2/3/4/5/6/7/8", "/1/2/3/4/5/6/7/8/9"}
	for _, rt := range routes {
		paths = append(paths, "/"+strings.Join(rt.pattern, "/"), "/"+strings.Join(rt.pattern, "/")+"/")
	}
	for range 20000 {
		n := rng.IntN(10)
		var b strings.Builder
		for range n {
			b.WriteString(strings.Repeat("/", 1+rng.IntN(2)-boolInt(rng.IntN(8) == 0)))
			b.WriteString(words[rng.IntN(len(words))])
		}
		if rng.IntN(3) == 0 {
			b.WriteString("/")
		}
		paths = append(paths, b.String())
	}
	matched := 0
	for _, p := range paths {
		for _, rt := range routes {
			wantArgs, want := matchSplit(rt.pattern, p)
			var buf [maxSegments][]byte
			gotArgs, got := match(rt.pattern, splitPath([]byte(p), buf[:0]))
			if got != want || !slices.Equal(gotArgs, wantArgs) {
				t.Fatalf("path %q, route %v: match %v %q, want %v %q", p, rt.pattern, got, gotArgs, want, wantArgs)
			}
			if got {
				matched++
			}
		}
	}
	if matched < 300 {
		t.Fatalf("only %d matches: the paths do not reach the routes", matched)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkRoute is finding the heartbeat's route for its path, as every
// agent request does; split is how it was found before (the path made a
// string and split).
func BenchmarkRoute(b *testing.B) {
	s := &Server{}
	table := s.routes()
	path := []byte("/v1/agent/heartbeat")
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf [maxSegments][]byte
			segs := splitPath(path, buf[:0])
			for i := range table {
				if _, ok := match(table[i].pattern, segs); ok {
					break
				}
			}
		}
	})
	b.Run("split", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			segs := strings.Split(strings.Trim(string(path), "/"), "/")
			for i := range table {
				if _, ok := matchSegs(table[i].pattern, segs); ok {
					break
				}
			}
		}
	})
}
